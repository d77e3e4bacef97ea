package lab

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/demo"
)

const bareUsers = 1000

// bareUpstream is the demo behind a gate: every bulk call is counted and
// its ids summed, then held until release is closed, so that a test can
// see every request waiting before any call answers.
type bareUpstream struct {
	srv           *httptest.Server
	calls, idsIn  atomic.Int64
	maxIDs        atomic.Int64
	release       chan struct{}
	releaseClosed sync.Once
}

func newBareUpstream(t *testing.T) *bareUpstream {
	u := &bareUpstream{release: make(chan struct{})}
	d := demo.New(demo.Options{QueryTime: -1, PerRowTime: -1, Users: bareUsers})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/users" {
			n := int64(len(strings.Split(r.URL.Query().Get("ids"), ",")))
			u.calls.Add(1)
			u.idsIn.Add(n)
			for m := u.maxIDs.Load(); n > m && !u.maxIDs.CompareAndSwap(m, n); m = u.maxIDs.Load() {
			}
			<-u.release
		}
		d.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { u.open(); u.srv.Close() })
	return u
}

func (u *bareUpstream) open() { u.releaseClosed.Do(func() { close(u.release) }) }

// pending is the ids b holds in calls not yet sent.
func (b *bareBatch) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	if b.open != nil {
		n = len(b.open.ids)
	}
	for _, c := range b.ready {
		n += len(c.ids)
	}
	return n
}

// getUser is GET /users/{id}'s status, Cache-Status, ETag and body.
func getUser(t *testing.T, base string, id int) (int, string, string, string) {
	r, err := http.Get(fmt.Sprintf("%s/users/%d", base, id))
	if err != nil {
		t.Error(err)
		return 0, "", "", ""
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
	}
	return r.StatusCode, r.Header.Get("Cache-Status"), r.Header.Get("Etag"), string(body)
}

// TestBareBatch: n requests for ids the bare batching server does not
// hold, all waiting at once, make fewer bulk calls than requests (at most
// one call that opened the window, then full calls of at most
// batchMaxSize ids, then the rest in one), and each gets its own element
// of the demo, with sidecache's ETag of it; asked again, every id is
// answered from memory with no call; after the forget endpoint, a call
// again.
func TestBareBatch(t *testing.T) {
	for _, c := range []struct {
		n    int
		lean bool
	}{{50, false}, {250, false}, {50, true}, {250, true}} {
		n := c.n
		t.Run(fmt.Sprintf("%d lean=%v", n, c.lean), func(t *testing.T) {
			up := newBareUpstream(t)
			b := newBareBatch(strings.TrimPrefix(up.srv.URL, "http://"), c.lean)
			mux := http.NewServeMux()
			b.routes(mux)
			srv := httptest.NewServer(mux)
			defer srv.Close()

			ids := make([]int, n)
			for i := range ids {
				ids[i] = 1 + (i*7919)%bareUsers // distinct, not in order
			}
			var wg sync.WaitGroup
			for _, id := range ids {
				wg.Go(func() {
					code, status, etag, body := getUser(t, srv.URL, id)
					want, _, _ := demo.Record("users", id, bareUsers)
					if code != 200 || body != string(want) || etag != bulk.ETag(want) || status != "bare; fwd=miss" {
						t.Errorf("GET /users/%d: %d %q %q %q, want 200, a miss, the demo's record %q and its tag %q", id, code, status, etag, body, want, bulk.ETag(want))
					}
				})
			}
			// Every request waits, in a call held at the gate or in one
			// not sent yet, before any call answers.
			for deadline := time.Now().Add(30 * time.Second); up.idsIn.Load()+int64(b.pending()) < int64(n); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("requests waiting: %d in calls, %d pending, want %d", up.idsIn.Load(), b.pending(), n)
				}
			}
			up.open()
			wg.Wait()
			calls := up.calls.Load()
			if most := int64(1 + (n-1+batchMaxSize-1)/batchMaxSize); calls > most || calls < 1 {
				t.Errorf("%d requests made %d bulk calls, want 1..%d", n, calls, most)
			}
			if m := up.maxIDs.Load(); m > batchMaxSize {
				t.Errorf("a bulk call of %d ids, more than %d", m, batchMaxSize)
			}
			if got := up.idsIn.Load(); got != int64(n) {
				t.Errorf("the calls held %d ids, want each of the %d once", got, n)
			}

			for _, id := range ids {
				code, status, etag, body := getUser(t, srv.URL, id)
				want, _, _ := demo.Record("users", id, bareUsers)
				if code != 200 || body != string(want) || etag != bulk.ETag(want) || status != "bare; hit" {
					t.Errorf("again GET /users/%d: %d %q %q %q, want 200, a hit, the same record and tag", id, code, status, etag, body)
				}
			}
			if got := up.calls.Load(); got != calls {
				t.Errorf("the ids asked again made %d bulk calls", got-calls)
			}

			if r, err := http.Post(srv.URL+BareForgetPath, "", nil); err != nil || r.StatusCode != http.StatusNoContent {
				t.Fatalf("forget: %v %v", r, err)
			}
			if _, status, _, _ := getUser(t, srv.URL, ids[0]); status != "bare; fwd=miss" || up.calls.Load() != calls+1 {
				t.Errorf("after forget: %q and %d more calls, want a miss and one call", status, up.calls.Load()-calls)
			}
		})
	}
}

// TestBareBatchAbsentAndFailed: an id the bulk answer lacks is a 404, a
// bulk call that fails a 502 for its waiters, with either splitter.
func TestBareBatchAbsentAndFailed(t *testing.T) {
	for _, lean := range []bool{false, true} {
		t.Run(fmt.Sprintf("lean=%v", lean), func(t *testing.T) {
			up := newBareUpstream(t)
			up.open()
			b := newBareBatch(strings.TrimPrefix(up.srv.URL, "http://"), lean)
			mux := http.NewServeMux()
			b.routes(mux)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			if code, _, _, _ := getUser(t, srv.URL, bareUsers+1); code != http.StatusNotFound {
				t.Errorf("an id the demo lacks: %d, want 404", code)
			}
			up.srv.Close()
			if code, _, _, _ := getUser(t, srv.URL, 1); code != http.StatusBadGateway {
				t.Errorf("the upstream down: %d, want 502", code)
			}
		})
	}
}

// TestElementID: the id from the element's head, as encoding/json writes
// the demo's records, or from anywhere in the object; none is an error.
func TestElementID(t *testing.T) {
	for elem, want := range map[string]int64{
		`{"id":42,"name":"a"}`:         42,
		`{"id":7}`:                     7,
		`{"name":"a","id":9}`:          9,
		`{"id" : 11, "name":"b"}`:      11,
		`{"name":"{\"id\":1,","id":3}`: 3,
	} {
		if got, err := elementID([]byte(elem)); err != nil || got != want {
			t.Errorf("elementID(%s) = %d, %v, want %d", elem, got, err, want)
		}
	}
	for _, elem := range []string{`{"name":"a"}`, `{"id":"x"}`, `[1]`} {
		if id, err := elementID([]byte(elem)); err == nil {
			t.Errorf("elementID(%s) = %d, want an error", elem, id)
		}
	}
}

// BenchmarkBareSplit is the bare batching server's work on one bulk
// answer of 25 demo users (the requests per bulk call of the CPU table's
// batch row): encoding/json's Decoder into json.RawMessage, the id, the
// ETag. Per element: ns/op ÷ 25. The lean sub-benchmark is its
// -batch-lean mode: sidecache's splitter over the whole body.
func BenchmarkBareSplit(b *testing.B) {
	answer := []byte{'['}
	for id := 1; id <= 25; id++ {
		if id > 1 {
			answer = append(answer, ',')
		}
		rec, _, _ := demo.Record("users", id, bareUsers)
		answer = append(answer, rec...)
	}
	answer = append(answer, ']')
	ids := make([]int64, 25)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	for _, lean := range []bool{false, true} {
		b.Run(fmt.Sprintf("lean=%v", lean), func(b *testing.B) {
			b.SetBytes(int64(len(answer)))
			b.ReportAllocs()
			for b.Loop() {
				var m map[int64]*bareEntry
				var err error
				if lean {
					m, err = splitLean(bytes.NewReader(answer), int64(len(answer)), ids)
				} else {
					m, err = splitBulk(bytes.NewReader(answer), 25)
				}
				if err != nil || len(m) != 25 {
					b.Fatal(len(m), err)
				}
			}
		})
	}
}
