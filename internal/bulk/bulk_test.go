package bulk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name string
		body string
		want map[string]string
	}{
		{"empty array", `[]`, map[string]string{}},
		{"number ids", `[{"id":1,"n":"a"},{"id":2,"n":"b"}]`,
			map[string]string{"1": `{"id":1,"n":"a"}`, "2": `{"id":2,"n":"b"}`}},
		{"string ids", `[{"id":"a"},{"id":"b"}]`,
			map[string]string{"a": `{"id":"a"}`, "b": `{"id":"b"}`}},
		{"string and number give the same key", `[{"id":"7","from":"string"},{"id":7,"from":"number"}]`,
			map[string]string{"7": `{"id":"7","from":"string"}`}},
		{"duplicates: first wins", `[{"id":1,"v":"first"},{"id":1,"v":"second"}]`,
			map[string]string{"1": `{"id":1,"v":"first"}`}},
		{"whitespace is compacted", " [\n  { \"id\" : 1 ,\n \"tags\" : [ 1 , 2 ] }\t]\n",
			map[string]string{"1": `{"id":1,"tags":[1,2]}`}},
		{"whitespace inside strings is kept", `[{"id":"a b","s":" x  y "}]`,
			map[string]string{"a b": `{"id":"a b","s":" x  y "}`}},
		{"nested objects and arrays", `[{"id":3,"a":{"id":99,"b":[{"id":1},[],{}]},"c":[null,true,1.5]}]`,
			map[string]string{"3": `{"id":3,"a":{"id":99,"b":[{"id":1},[],{}]},"c":[null,true,1.5]}`}},
		{"unicode id and body", `[{"id":"héllo-世界","name":"Zoë"}]`,
			map[string]string{"héllo-世界": `{"id":"héllo-世界","name":"Zoë"}`}},
		{"escaped id is unescaped, body kept as sent", `[{"id":"\u00e9\"q"}]`,
			map[string]string{`é"q`: `{"id":"\u00e9\"q"}`}},
		{"comma in string id", `[{"id":"a,b"},{"id":"c"}]`,
			map[string]string{"a,b": `{"id":"a,b"}`, "c": `{"id":"c"}`}},
		{"exponent number keeps its literal", `[{"id":1e3}]`, map[string]string{"1e3": `{"id":1e3}`}},
		{"negative zero keeps its literal", `[{"id":-0}]`, map[string]string{"-0": `{"id":-0}`}},
		{"fraction keeps its literal", `[{"id":7.0}]`, map[string]string{"7.0": `{"id":7.0}`}},
		{"big number is not rounded", `[{"id":12345678901234567890123}]`,
			map[string]string{"12345678901234567890123": `{"id":12345678901234567890123}`}},
		{"repeated field: last counts", `[{"id":1,"id":2}]`, map[string]string{"2": `{"id":1,"id":2}`}},
		{"escaped field name matches", `[{"\u0069d":5}]`, map[string]string{"5": `{"\u0069d":5}`}},
		{"empty string id", `[{"id":""}]`, map[string]string{"": `{"id":""}`}},
		// A DataLoader batch function's null for an id it does not
		// know is no element: that id is absent, as an omitted one.
		{"null element is none", `[null]`, map[string]string{}},
		{"null elements are none", `[null,null]`, map[string]string{}},
		{"null beside an element", `[{"id":1},null]`, map[string]string{"1": `{"id":1}`}},
		{"null between elements", `[{"id":1},null,{"id":3}]`,
			map[string]string{"1": `{"id":1}`, "3": `{"id":3}`}},
		{"spaced null", " [ null ,\n {\"id\" : 2} ] ", map[string]string{"2": `{"id":2}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Split([]byte(tt.body), "id")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d elements %q, want %d", len(got), got, len(tt.want))
			}
			for id, want := range tt.want {
				if g, ok := got[id]; !ok || string(g) != want {
					t.Errorf("id %q: got %q (present=%v), want %q", id, g, ok, want)
				}
			}
		})
	}
}

func TestSplitCopiesElements(t *testing.T) {
	body := []byte(`[{"id":1,"v":"x"}]`)
	got, err := Split(body, "id")
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = ' '
	}
	if string(got["1"]) != `{"id":1,"v":"x"}` {
		t.Fatalf("element changed with the input: %q", got["1"])
	}
}

// TestSplitMalformed: every bad answer is ErrMalformed; those that are valid
// JSON of the wrong shape are ErrShape too (the proxy isolates them), broken
// JSON is not (the proxy fails the batch).
func TestSplitMalformed(t *testing.T) {
	tests := []struct {
		name, body string
		shape      bool
	}{
		{"empty", ``, false},
		{"null", `null`, true},
		{"object", `{"id":1}`, true},
		{"string", `"[]"`, true},
		{"truncated", `[{"id":1}`, false},
		{"trailing garbage", `[{"id":1}] x`, false},
		{"two values", `[] []`, false},
		{"element is a number", `[{"id":1},2]`, true},
		{"element is a string", `[{"id":1},"2"]`, true},
		{"element is false", `[false]`, true},
		{"null then a number", `[null,2]`, true},
		{"element is an array", `[[{"id":1}]]`, true},
		{"missing id", `[{"id":1},{"name":"x"}]`, true},
		{"id in other case", `[{"ID":1}]`, true},
		{"id null", `[{"id":null}]`, true},
		{"id null beside a null element", `[null,{"id":null}]`, true},
		{"empty object beside a null element", `[null,{}]`, true},
		{"null nested in an array element", `[[null]]`, true},
		{"id bool", `[{"id":true}]`, true},
		{"id object", `[{"id":{"v":1}}]`, true},
		{"id array", `[{"id":[1]}]`, true},
		{"id only nested", `[{"a":{"id":1}}]`, true},
		{"invalid json inside", `[{"id":1,"v":tru}]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Split([]byte(tt.body), "id")
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got (%q, %v), want ErrMalformed", got, err)
			}
			if errors.Is(err, ErrShape) != tt.shape {
				t.Errorf("errors.Is(%v, ErrShape) = %v, want %v", err, !tt.shape, tt.shape)
			}
			if got != nil {
				t.Errorf("got elements %q alongside an error", got)
			}
		})
	}
}

func TestJoin(t *testing.T) {
	tests := []struct {
		name  string
		elems []string
		want  string
	}{
		{"nil", nil, `[]`},
		{"one", []string{`{"id":1}`}, `[{"id":1}]`},
		{"order kept", []string{`{"id":3}`, `{"id":1}`, `{"id":2}`}, `[{"id":3},{"id":1},{"id":2}]`},
		{"duplicates kept", []string{`1`, `1`}, `[1,1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var elems [][]byte
			for _, e := range tt.elems {
				elems = append(elems, []byte(e))
			}
			got := Join(elems)
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if len(got) != cap(got) {
				t.Errorf("len %d cap %d: size precomputed wrong", len(got), cap(got))
			}
		})
	}
}

func TestParseIDs(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		wantErr error
	}{
		{"brief example", "3,1, 2,3", 10, []string{"3", "1", "2"}, nil},
		{"single", "42", 1, []string{"42"}, nil},
		{"tabs and spaces trimmed", "\ta ,  b\t", 10, []string{"a", "b"}, nil},
		{"inner space kept", "a b,c", 10, []string{"a b", "c"}, nil},
		{"unicode", "é,世界", 10, []string{"é", "世界"}, nil},
		{"at the bound", "1,2,3", 3, []string{"1", "2", "3"}, nil},
		{"over the bound", "1,2,3,4", 3, nil, ErrTooManyIDs},
		{"duplicates do not count", "1,2,1,3,2,3,3", 3, []string{"1", "2", "3"}, nil},
		{"many copies of one id", strings.Repeat("x,", 10000) + "x", 1, []string{"x"}, nil},
		{"no bound", strings.TrimSuffix(strings.Repeat("x,y,", 1000), ","), 0, []string{"x", "y"}, nil},
		{"empty", "", 10, nil, ErrNoIDs},
		{"blank", " \t ", 10, nil, ErrNoIDs},
		{"only a comma", ",", 10, nil, ErrEmptyID},
		{"only separators", " , ,, ", 10, nil, ErrEmptyID},
		{"empty element", "1,,2", 10, nil, ErrEmptyID},
		{"blank element", "1, ,2", 10, nil, ErrEmptyID},
		{"trailing comma", "1,2,", 10, nil, ErrEmptyID},
		{"leading comma", ",1", 10, nil, ErrEmptyID},
		{"empty element past the bound", "1,2,3,4,,", 3, nil, ErrTooManyIDs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIDs(tt.in, tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrIDList) || got != nil {
					t.Fatalf("got (%q, %v), want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestParseIDsErrorsAreDistinct: each way a list is bad has its own error,
// so the proxy's 400 can say which.
func TestParseIDsErrorsAreDistinct(t *testing.T) {
	errs := []error{ErrNoIDs, ErrEmptyID, ErrTooManyIDs}
	for i, a := range errs {
		for j, b := range errs {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v is %v", a, b)
			}
		}
	}
}

func FuzzParseIDs(f *testing.F) {
	for _, seed := range []string{"", " ", ",", "1,,2", "1, ,2", "3,1, 2,3", "a b,c", "é,世界", "1,2,", "\t1\n,2", "1,1,1,1,2"} {
		f.Add(seed, 3)
	}
	f.Fuzz(func(t *testing.T, v string, maxIDs int) {
		got, err := ParseIDs(v, maxIDs)
		want, wantErr := referenceParseIDs(v, maxIDs)
		if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
			t.Fatalf("ParseIDs(%q, %d) error %v, want %v", v, maxIDs, err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrIDList) || got != nil {
				t.Fatalf("ParseIDs(%q, %d) = (%q, %v)", v, maxIDs, got, err)
			}
			return
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ParseIDs(%q, %d) = %q, want %q", v, maxIDs, got, want)
		}
		if len(got) == 0 || maxIDs > 0 && len(got) > maxIDs {
			t.Fatalf("ParseIDs(%q, %d) gave %d ids", v, maxIDs, len(got))
		}
		// No id holds a comma, so the bulk URL carries each one intact.
		q, perr := url.ParseQuery(strings.TrimPrefix(URL("/u", "ids", got), "/u?"))
		if perr != nil {
			t.Fatal(perr)
		}
		if back := strings.Split(q.Get("ids"), ","); !slices.Equal(back, got) {
			t.Fatalf("URL of %q decodes to %q", got, back)
		}
	})
}

// referenceParseIDs is the obvious reading of ParseIDs's contract: split on
// commas, trim, reject blanks, keep the first of each id, then count.
func referenceParseIDs(v string, maxIDs int) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, ErrNoIDs
	}
	var ids []string
	for _, p := range strings.Split(v, ",") {
		id := strings.TrimSpace(p)
		if id == "" {
			if maxIDs > 0 && len(ids) > maxIDs {
				return nil, ErrTooManyIDs
			}
			return nil, ErrEmptyID
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if maxIDs > 0 && len(ids) > maxIDs {
		return nil, ErrTooManyIDs
	}
	return ids, nil
}

func TestURL(t *testing.T) {
	tests := []struct {
		name, path, param string
		ids               []string
		want              string
	}{
		{"plain", "/users", "ids", []string{"1", "2", "3"}, "/users?ids=1,2,3"},
		{"one id", "/users", "ids", []string{"7"}, "/users?ids=7"},
		{"no ids", "/users", "ids", nil, "/users?ids="},
		{"comma in id escaped", "/users", "ids", []string{"a,b", "c"}, "/users?ids=a%2Cb,c"},
		{"reserved chars escaped", "/u", "ids", []string{"a&b=c", "d e", "f/g", "h+i"}, "/u?ids=a%26b%3Dc,d+e,f%2Fg,h%2Bi"},
		{"unicode escaped", "/u", "ids", []string{"é"}, "/u?ids=%C3%A9"},
		{"param escaped", "/u", "id s", []string{"1"}, "/u?id+s=1"},
		{"existing query", "/users?active=1", "ids", []string{"1", "2"}, "/users?active=1&ids=1,2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := URL(tt.path, tt.param, tt.ids); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestURLRoundTrip checks that a server splitting the parameter on commas
// and query-unescaping each part gets back exactly the ids URL was given.
func TestURLRoundTrip(t *testing.T) {
	ids := []string{"1", "a b", "é", "x&y", "100%", "a,b"}
	u, err := url.Parse(URL("/users", "ids", ids))
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.TrimPrefix(u.RawQuery, "ids=")
	var got []string
	for p := range strings.SplitSeq(raw, ",") {
		id, err := url.QueryUnescape(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("got %q, want %q", got, ids)
	}
}

func FuzzSplit(f *testing.F) {
	for _, seed := range []string{
		`[]`,
		`[{"id":1},{"id":"2"},{"id":1}]`,
		`[{"id":1e3,"a":{"b":[1,2,{"id":4}]}},{"id":-0}]`,
		" [ {\"id\" : \"a,b\" , \"s\":\"x  y\" } ] ",
		`[{"id":"\u00e9"},{"id":"é"}]`,
		`[{"id":null}]`,
		`{"id":1}`,
		`[{"id":1}`,
		`[null]`,
		`[{"id":1},null,{"id":"3"}]`,
		` [ null , { "id" : 2 } ] `,
		`[null,{}]`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := Split(body, "id")
		want, wantOK := referenceIDs(body, "id")
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if wantOK {
				t.Fatalf("Split failed (%v) where encoding/json finds ids %q", err, want)
			}
			return
		}
		if !wantOK || !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
			t.Fatalf("Split found ids %q, encoding/json finds %q (ok=%v)", slices.Sorted(maps.Keys(got)), want, wantOK)
		}
		ref := referenceElements(body, "id")
		for id, e := range got {
			if !json.Valid(e) {
				t.Fatalf("element %q is not valid JSON: %q", id, e)
			}
			if string(e) != ref[id] {
				t.Fatalf("element %q is %q, encoding/json's (compacted) %q", id, e, ref[id])
			}
		}
		checkSplitFor(t, body)
		again, err := Split(Join(slices.Collect(maps.Values(got))), "id")
		if err != nil {
			t.Fatalf("re-splitting the joined elements: %v", err)
		}
		if !maps.EqualFunc(got, again, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("re-split gave %q, want %q", again, got)
		}
	})
}

// referenceIDs is the slow, obvious reading of Split's contract that the
// fuzz test holds the hand-rolled field scanner to: the sorted distinct ids,
// and whether the body is a valid answer at all.
func referenceIDs(body []byte, idField string) ([]string, bool) {
	var elems []map[string]json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil || elems == nil {
		return nil, false
	}
	var raws []json.RawMessage
	if json.Unmarshal(body, &raws) != nil {
		return nil, false
	}
	seen := map[string]bool{}
	for i, obj := range elems {
		if string(raws[i]) == "null" {
			continue // no element (a DataLoader's unknown id)
		}
		v, ok := obj[idField]
		if obj == nil || !ok {
			return nil, false
		}
		var id any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&id); err != nil {
			return nil, false
		}
		switch id := id.(type) {
		case string:
			seen[id] = true
		case json.Number:
			seen[id.String()] = true
		default:
			return nil, false
		}
	}
	return slices.Sorted(maps.Keys(seen)), true
}

// referenceElements is each id's element of a valid answer as
// encoding/json finds it, compacted: the first element carrying the id
// (referenceIDs reads the ids alike). Split slices its elements out of the
// pass that validates the answer: this holds the slices to the elements.
func referenceElements(body []byte, idField string) map[string]string {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil
	}
	out := map[string]string{}
	for _, raw := range raws {
		if string(raw) == "null" {
			continue // no element
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil
		}
		var id any
		d := json.NewDecoder(bytes.NewReader(obj[idField]))
		d.UseNumber()
		if err := d.Decode(&id); err != nil {
			return nil
		}
		k := fmt.Sprint(id)
		if _, dup := out[k]; dup {
			continue
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil
		}
		out[k] = c.String()
	}
	return out
}

func BenchmarkSplit(b *testing.B) {
	var elems [][]byte
	for i := range 100 {
		elems = append(elems, fmt.Appendf(nil,
			`{"id":%d,"name":"user %d","email":"user%d@example.com","roles":["a","b"],"profile":{"age":%d,"active":true}}`,
			i, i, i, 20+i%50))
	}
	body := Join(elems)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if m, err := Split(body, "id"); err != nil || len(m) != 100 {
			b.Fatalf("got %d elements, %v", len(m), err)
		}
	}
}
