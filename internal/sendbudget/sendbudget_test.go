package sendbudget

import (
	"sync/atomic"
	"testing"
)

// conn is a Sender whose progress the test moves.
type conn struct {
	name  string
	taken atomic.Int64
	cuts  atomic.Int32
}

func (c *conn) Taken() int64 { return c.taken.Load() }
func (c *conn) Cut()         { c.cuts.Add(1) }

type waiting struct {
	c *conn
	h Hold
}

func begin(b *Budget, name string, p []byte) *waiting {
	w := &waiting{c: &conn{name: name}}
	b.Begin(&w.h, w.c, p)
	return w
}

func cutNames(ws ...*waiting) []string {
	var out []string
	for _, w := range ws {
		if n := w.c.cuts.Load(); n > 0 {
			out = append(out, w.c.name)
			if n > 1 {
				out = append(out, w.c.name+" again")
			}
		}
	}
	return out
}

func eqNames(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: cut %q, want %q", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: cut %q, want %q", what, got, want)
		}
	}
}

func counts(t *testing.T, b *Budget, held, writes int64) {
	t.Helper()
	if b.Held() != held || b.Writes() != writes {
		t.Fatalf("held %d bytes in %d writes, want %d in %d", b.Held(), b.Writes(), held, writes)
	}
}

// Different bodies over the budget: the one waiting longest goes first,
// and the write that begins is never cut by its own arrival.
func TestOldestCutFirst(t *testing.T) {
	b := New(250)
	a, c, d := begin(b, "a", make([]byte, 100)), begin(b, "c", make([]byte, 100)), (*waiting)(nil)
	counts(t, b, 200, 2)
	d = begin(b, "d", make([]byte, 100))
	eqNames(t, "third write", cutNames(a, c, d), "a")
	counts(t, b, 200, 2)
	b.End(&a.h) // the cut write returns: nothing more to take out
	counts(t, b, 200, 2)
	e := begin(b, "e", make([]byte, 1000)) // alone over the budget
	eqNames(t, "a write larger than the budget", cutNames(a, c, d, e), "a", "c", "d")
	counts(t, b, 1000, 1)
	b.End(&e.h)
	counts(t, b, 0, 0)
}

// Writes of one body (they end at its last byte) count once, the largest
// of them, and are cut together.
func TestSharedBodyCountsOnce(t *testing.T) {
	b := New(250)
	body := make([]byte, 200)
	ws := []*waiting{begin(b, "a", body[10:]), begin(b, "b", body[4:]), begin(b, "c", body[10:])}
	counts(t, b, 196, 3)
	eqNames(t, "three writes of one body", cutNames(ws...))
	b.End(&ws[1].h)
	counts(t, b, 196, 2)
	d := begin(b, "d", make([]byte, 100))
	eqNames(t, "another body over the budget", cutNames(append(ws, d)...), "a", "c")
	counts(t, b, 100, 1)
}

// A write whose client reads (its socket took bytes since it was last
// looked at) is kept over one that began after it but made no progress.
func TestProgressKeepsAWrite(t *testing.T) {
	b := New(250)
	a := begin(b, "a", make([]byte, 100))
	c := begin(b, "c", make([]byte, 100))
	a.c.taken.Add(4096) // a's client reads
	d := begin(b, "d", make([]byte, 100))
	eqNames(t, "third write", cutNames(a, c, d), "c")
	// a's progress was seen after d began: d, which took nothing, is
	// the one held longest without progress now.
	e := begin(b, "e", make([]byte, 100))
	eqNames(t, "fourth write", cutNames(a, c, d, e), "c", "d")
	// a read nothing since, e began after it: a goes next.
	f := begin(b, "f", make([]byte, 100))
	eqNames(t, "fifth write", cutNames(a, c, d, e, f), "a", "c", "d")
}

// A lower bound cuts at once what no longer fits; a zero one is the default.
func TestSetMax(t *testing.T) {
	b := New(1000)
	a, c := begin(b, "a", make([]byte, 100)), begin(b, "c", make([]byte, 100))
	b.SetMax(150)
	eqNames(t, "lowered to 150", cutNames(a, c), "a")
	counts(t, b, 100, 1)
	if b.Max() != 150 {
		t.Fatalf("Max %d, want 150", b.Max())
	}
	b.SetMax(0)
	if b.Max() != DefaultMax {
		t.Fatalf("Max %d after SetMax(0), want DefaultMax", b.Max())
	}
	b.End(&c.h)
	b.End(&c.h) // twice: no harm
	counts(t, b, 0, 0)
}
