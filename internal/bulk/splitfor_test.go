package bulk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// checkSplitFor holds SplitFor to Split on body: the same error (ErrShape
// or not), and for the ids Split finds, in another order and with an
// absent id, the same elements; nil for the absent id.
func checkSplitFor(t *testing.T, body []byte) {
	t.Helper()
	want, werr := Split(body, "id")
	ids := slices.Sorted(maps.Keys(want))
	slices.Reverse(ids)
	ids = append(ids, "\x00absent")
	got, err := SplitFor(body, "id", ids)
	if (err == nil) != (werr == nil) || errors.Is(err, ErrShape) != errors.Is(werr, ErrShape) || errors.Is(err, ErrMalformed) != errors.Is(werr, ErrMalformed) {
		t.Fatalf("SplitFor(%q) error %v, Split's %v", body, err, werr)
	}
	if err != nil {
		if got != nil {
			t.Fatalf("SplitFor(%q) gave elements %q alongside an error", body, got)
		}
		return
	}
	if len(got) != len(ids) {
		t.Fatalf("SplitFor(%q): %d elements for %d ids", body, len(got), len(ids))
	}
	for i, id := range ids {
		w, ok := want[id]
		switch {
		case !ok && got[i] != nil:
			t.Errorf("SplitFor(%q): absent id %q got %q", body, id, got[i])
		case ok && string(got[i]) != string(w):
			t.Errorf("SplitFor(%q): id %q got %q, Split %q", body, id, got[i], w)
		}
	}
	// In the answer's own order, as most upstreams list them (SplitFor
	// then compares each id with the next asked), an absent id amid them.
	inOrder := answerOrder(body)
	inOrder = slices.Insert(inOrder, len(inOrder)/2, "\x00absent")
	ordered, err := SplitFor(body, "id", inOrder)
	if err != nil {
		t.Fatalf("SplitFor(%q) in the answer's order: %v", body, err)
	}
	for i, id := range inOrder {
		if w, ok := want[id]; string(ordered[i]) != string(w) || !ok && ordered[i] != nil {
			t.Errorf("SplitFor(%q) in the answer's order: id %q got %q, Split %q", body, id, ordered[i], w)
		}
	}
	// With room for each element's ETag: the same elements, each tag
	// written past its own element alone.
	roomy, err := SplitForRoom(body, "id", ids, ETagLen)
	if err != nil {
		t.Fatalf("SplitForRoom(%q): %v", body, err)
	}
	tags := make([]string, len(ids))
	for i, e := range roomy {
		if e == nil {
			continue
		}
		var b []byte
		tags[i], b = ETagAfter(e)
		if string(b) != string(got[i]) || cap(b) != len(b) {
			t.Fatalf("ETagAfter(%q): body %q (cap %d), want %q capped", e, b, cap(b), got[i])
		}
	}
	for i, e := range roomy {
		if e != nil && (string(e) != string(got[i]) || tags[i] != ETag(got[i])) {
			t.Errorf("SplitForRoom(%q): id %q: %q tag %s, want %q tag %s", body, ids[i], e, tags[i], got[i], ETag(got[i]))
		}
	}
}

// answerOrder is the ids of a valid answer in the order of their first
// element, as encoding/json reads them (referenceElements).
func answerOrder(body []byte) []string {
	var raws []json.RawMessage
	if json.Unmarshal(body, &raws) != nil {
		return nil
	}
	var ids []string
	for _, raw := range raws {
		if string(raw) == "null" {
			continue // no element
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		var id any
		d := json.NewDecoder(bytes.NewReader(obj["id"]))
		d.UseNumber()
		if d.Decode(&id) != nil {
			return nil
		}
		if k := fmt.Sprint(id); !slices.Contains(ids, k) {
			ids = append(ids, k)
		}
	}
	return ids
}

// ETagAfter gives ETag's tag with or without room past the element.
func TestETagAfter(t *testing.T) {
	elem := []byte(`{"id":1}`)
	for _, room := range []int{0, ETagLen - 1, ETagLen, 64} {
		e := append(make([]byte, 0, len(elem)+room), elem...)
		tag, b := ETagAfter(e)
		if tag != ETag(elem) || string(b) != string(elem) {
			t.Errorf("room %d: %s %q, want %s %q", room, tag, b, ETag(elem), elem)
		}
		if b = append(b, "xxxxxxxxxxxxxxxxxxxxxxxx"...); tag != ETag(elem) {
			t.Errorf("room %d: an append to the body changed its tag to %s", room, tag)
		}
	}
}

// SplitFor agrees with Split on every answer of TestSplit and
// TestSplitMalformed (and FuzzSplit's, which calls checkSplitFor).
func TestSplitForAgreesWithSplit(t *testing.T) {
	for _, body := range []string{
		`[]`, `[{"id":1,"n":"a"},{"id":2,"n":"b"}]`, `[{"id":"a"},{"id":"b"}]`,
		`[{"id":"7","from":"string"},{"id":7,"from":"number"}]`, `[{"id":1,"v":"first"},{"id":1,"v":"second"}]`,
		" [\n  { \"id\" : 1 ,\n \"tags\" : [ 1 , 2 ] }\t]\n", `[{"id":"a b","s":" x  y "}]`,
		`[{"id":3,"a":{"id":99,"b":[{"id":1},[],{}]},"c":[null,true,1.5]}]`, `[{"id":"héllo-世界","name":"Zoë"}]`,
		`[{"id":"\u00e9\"q"}]`, `[{"id":"\u00e9"},{"id":"é"}]`, `[{"id":"a,b"},{"id":"c"}]`, `[{"id":1e3}]`, `[{"id":-0}]`,
		`[{"id":7.0}]`, `[{"id":12345678901234567890123}]`, `[{"id":1,"id":2}]`, `[{"\u0069d":5}]`, `[{"id":""}]`,
		``, `null`, `{"id":1}`, `"[]"`, `[{"id":1}`, `[{"id":1}] x`, `[] []`, `[{"id":1},2]`, `[null]`, `[[{"id":1}]]`,
		`[{"id":1},{"name":"x"}]`, `[{"ID":1}]`, `[{"id":null}]`, `[{"id":true}]`, `[{"id":{"v":1}}]`, `[{"id":[1]}]`,
		`[{"a":{"id":1}}]`, `[{"id":1,"v":tru}]`,
		`[null,null]`, `[{"id":1},null]`, `[{"id":1},null,{"id":3}]`, " [ null ,\n {\"id\" : 2} ] ",
		`[{"id":1},"2"]`, `[false]`, `[null,2]`, `[null,{"id":null}]`, `[null,{}]`, `[[null]]`,
	} {
		checkSplitFor(t, []byte(body))
	}
}

// The elements of a 100-id bulk answer cost SplitFor one allocation each
// plus a few for the whole answer; Split makes two each and a map.
func TestSplitForAllocations(t *testing.T) {
	var elems [][]byte
	var ids []string
	for i := range 100 {
		elems = append(elems, fmt.Appendf(nil, `{"id":%d,"name":"user %d"}`, i, i))
		ids = append(ids, fmt.Sprint(i))
	}
	body := Join(elems)
	n := testing.AllocsPerRun(20, func() {
		if out, err := SplitFor(body, "id", ids); err != nil || out[99] == nil {
			t.Fatalf("SplitFor: %v", err)
		}
	})
	if n > float64(len(ids)+10) {
		t.Errorf("SplitFor: %v allocations for %d elements, want at most %d", n, len(ids), len(ids)+10)
	}
}

// BenchmarkSplitFor is BenchmarkSplit's answer split for its 100 ids, as
// a batch does.
func BenchmarkSplitFor(b *testing.B) {
	var elems [][]byte
	var ids []string
	for i := range 100 {
		elems = append(elems, fmt.Appendf(nil,
			`{"id":%d,"name":"user %d","email":"user%d@example.com","roles":["a","b"],"profile":{"age":%d,"active":true}}`,
			i, i, i, 20+i%50))
		ids = append(ids, fmt.Sprint(i))
	}
	body := Join(elems)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err := SplitFor(body, "id", ids); err != nil || out[99] == nil {
			b.Fatalf("SplitFor: %v", err)
		}
	}
}

// BenchmarkSplitForBio is SplitFor on the answer shape the demo upstream
// sends: 25 records of about 800 bytes, most of them one long string (a
// bio), which the validator skips 8 bytes at a time.
func BenchmarkSplitForBio(b *testing.B) {
	body, ids := bioAnswer()
	benchSplitForRoom(b, body, ids)
}

// bioAnswer is the demo upstream's answer shape of the Bio benchmarks:
// 25 records, their ids in the answer's order.
func bioAnswer() (body []byte, ids []string) {
	var elems [][]byte
	for i := range 25 {
		bio := strings.Repeat("lorem ipsum dolor ", 30+i%20)
		elems = append(elems, fmt.Appendf(nil,
			`{"id":%d,"name":"Ann Smith","email":"ann.%d@users.example.com","version":1,"updated_at":"2024-01-01T00:00:00Z","bio":%q}`,
			100000+i, i, bio))
		ids = append(ids, fmt.Sprint(100000+i))
	}
	return Join(elems), ids
}

// SplitFor finds each element's place in every order of the ids, within
// maxScan ids (by comparing ids) and past it (by the map): reversed,
// rotated, pairs swapped (a batch's arrival order against an answer
// sorted by id), an absent id among them.
func TestSplitForOrders(t *testing.T) {
	// "u1000"…, and ids that share their last 8 bytes (tail8).
	for _, n := range []int{1, 2, 10, maxScan, maxScan + 1, 150, -10, -maxScan} {
		format := "u%d"
		if n < 0 {
			n, format = -n, "%d-shared-tail"
		}
		var elems [][]byte
		var sorted []string
		for i := range n {
			elems = append(elems, fmt.Appendf(nil, `{"id":"`+format+`","n":%d}`, 1000+i, i))
			sorted = append(sorted, fmt.Sprintf(format, 1000+i))
		}
		body := Join(elems)
		want, err := Split(body, "id")
		if err != nil {
			t.Fatal(err)
		}
		reversed := slices.Clone(sorted)
		slices.Reverse(reversed)
		rotated := append(slices.Clone(sorted[n/3:]), sorted[:n/3]...)
		swapped := slices.Clone(sorted)
		for i := 0; i+1 < n; i += 2 {
			swapped[i], swapped[i+1] = swapped[i+1], swapped[i]
		}
		for name, ids := range map[string][]string{"sorted": sorted, "reversed": reversed, "rotated": rotated, "swapped": swapped} {
			ids = slices.Insert(slices.Clone(ids), len(ids)/2, "absent")
			got, err := SplitForRoom(body, "id", ids, ETagLen)
			if err != nil {
				t.Fatalf("%d ids %s: %v", n, name, err)
			}
			for i, id := range ids {
				if w, ok := want[id]; string(got[i]) != string(w) || !ok && got[i] != nil {
					t.Errorf("%d ids %s: id %q got %q, want %q", n, name, id, got[i], w)
				}
			}
		}
	}
}

// BenchmarkSplitForBioNearOrder is BenchmarkSplitForBio with the ids asked
// nearly in the answer's order, as a batch asks the demo upstream (its
// answer is sorted by id, ORDER BY id; the batch lists ids as requests
// came, pairs of them swapped here).
func BenchmarkSplitForBioNearOrder(b *testing.B) {
	body, ids := bioAnswer()
	for i := 0; i+1 < len(ids); i += 2 {
		ids[i], ids[i+1] = ids[i+1], ids[i]
	}
	benchSplitForRoom(b, body, ids)
}

// BenchmarkSplitForBioShuffled is BenchmarkSplitForBioNearOrder with the
// ids in no order the answer's follows (a batch of requests from many
// clients at once).
func BenchmarkSplitForBioShuffled(b *testing.B) {
	body, ids := bioAnswer()
	for i := range ids { // a fixed permutation: i -> 7i mod 25
		ids[i] = fmt.Sprint(100000 + 7*i%25)
	}
	benchSplitForRoom(b, body, ids)
}

func benchSplitForRoom(b *testing.B, body []byte, ids []string) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err := SplitForRoom(body, "id", ids, ETagLen); err != nil || out[24] == nil {
			b.Fatalf("SplitFor: %v", err)
		}
	}
}

// A null in the answer (a DataLoader's unknown id) is no element and no
// stray: the id it stands for is absent, as an omitted one is, not one
// the answer names otherwise (bulk-echo-spelling's strays), whether the
// null is in its place, first, or the answer's only value.
func TestSplitForNullIsNoStray(t *testing.T) {
	for _, tt := range []struct {
		body string
		ids  []string
		want []string // "" for nil
	}{
		{`[{"id":1},null,{"id":3}]`, []string{"1", "2", "3"}, []string{`{"id":1}`, "", `{"id":3}`}},
		{`[null]`, []string{"2"}, []string{""}},
		{`[null,null]`, []string{"1", "2"}, []string{"", ""}},
		{`[null,{"id":"b"}]`, []string{"a", "b"}, []string{"", `{"id":"b"}`}},
	} {
		out, strays, err := SplitForRoomStrays([]byte(tt.body), "id", tt.ids, ETagLen)
		if err != nil || strays != 0 || len(out) != len(tt.ids) {
			t.Fatalf("SplitForRoomStrays(%s, %q) = %q, %d strays, %v; want %q, 0 strays", tt.body, tt.ids, out, strays, err, tt.want)
		}
		for i, w := range tt.want {
			if string(out[i]) != w || w == "" && out[i] != nil {
				t.Errorf("SplitForRoomStrays(%s): id %q got %q, want %q", tt.body, tt.ids[i], out[i], w)
			}
		}
	}
}
