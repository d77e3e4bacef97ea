package surrogate_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/surrogate"
)

var both = surrogate.Config{Names: []string{"surrogate-key", " xkey ", "Surrogate-Key"}, Strip: true}

// An upstream's keys become tags: split on spaces, tabs and commas, across
// repeated headers, de-duplicated, the reserved "_" ones ignored; past the
// bounds (32 keys, 256 bytes a key, no control characters) the answer must
// not be stored.
func TestAppendKeys(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("k%d", i)
	}
	for _, tc := range []struct {
		name   string
		have   []string
		header http.Header
		want   []string
		ok     bool
	}{
		{"none", nil, http.Header{}, nil, true},
		{"spaces tabs commas", nil, http.Header{"Surrogate-Key": {"a  b\tc,d"}}, []string{"a", "b", "c", "d"}, true},
		{"both headers, repeated", nil, http.Header{"Surrogate-Key": {"a"}, "Xkey": {"b", "c, a"}}, []string{"a", "b", "c"}, true},
		{"deduplicated against the tags held", []string{"_uri:/x", "a"}, http.Header{"Xkey": {"a b"}}, []string{"_uri:/x", "a", "b"}, true},
		{"reserved ignored", nil, http.Header{"Xkey": {"_route:x _uri:/y z"}}, []string{"z"}, true},
		{"unlisted header ignored", nil, http.Header{"Cache-Tag": {"a"}}, nil, true},
		{"32 keys", nil, http.Header{"Xkey": {strings.Join(many[:32], " ")}}, many[:32], true},
		{"33 keys", nil, http.Header{"Xkey": {strings.Join(many, " ")}}, many[:32], false},
		{"256 bytes", nil, http.Header{"Xkey": {strings.Repeat("k", 256)}}, []string{strings.Repeat("k", 256)}, true},
		{"257 bytes", nil, http.Header{"Xkey": {"a " + strings.Repeat("k", 257)}}, []string{"a"}, false},
		{"control character", nil, http.Header{"Xkey": {"a\x7fb"}}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := surrogate.New(both).AppendKeys(slices.Clone(tc.have), tc.header)
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Fatalf("AppendKeys = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestStripFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    surrogate.Config
		want []string // header names left
	}{
		{"strip", both, []string{"Etag"}},
		{"keep", surrogate.Config{Names: both.Names}, []string{"Etag", "Surrogate-Key", "Xkey"}},
		{"zero", surrogate.Config{}, []string{"Etag", "Surrogate-Key", "Xkey"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Surrogate-Key": {"a"}, "Xkey": {"b"}, "Etag": {`"1"`}}
			will := surrogate.New(tc.c).StripsFrom(h)
			if surrogate.New(tc.c).StripsFrom(http.Header{"Etag": {`"1"`}}) {
				t.Error("StripsFrom a header without tag fields")
			}
			surrogate.New(tc.c).StripFrom(h)
			if removed := len(h) < 3; will != removed {
				t.Errorf("StripsFrom() = %v, but StripFrom removed something: %v", will, removed)
			}
			var left []string
			for k := range h {
				left = append(left, k)
			}
			slices.Sort(left)
			if !slices.Equal(left, tc.want) {
				t.Fatalf("left %q, want %q", left, tc.want)
			}
			if removed := len(left) < 3; surrogate.New(tc.c).Strips() != removed {
				t.Errorf("Strips() = %v, but StripFrom removed something: %v", !removed, removed)
			}
		})
	}
}

// A 304 naming no keys keeps the old ones (RFC 9111 §4.3.4), the reserved
// ones aside; a 304 naming keys replaces them.
func TestCarryOver(t *testing.T) {
	old := []string{"_uri:/x", "a", "b"}
	for _, tc := range []struct {
		name   string
		c      surrogate.Config
		update http.Header
		want   []string // the first tag header of merged
	}{
		{"carried", both, http.Header{}, []string{"a b"}},
		{"304 names keys", both, http.Header{"Xkey": {"c"}}, nil},
		{"unstripped", surrogate.Config{Names: both.Names}, http.Header{}, nil},
		{"no tag headers", surrogate.Config{Strip: true}, http.Header{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			merged := http.Header{}
			surrogate.New(tc.c).CarryOver(merged, tc.update, old)
			if got := merged["Surrogate-Key"]; !slices.Equal(got, tc.want) {
				t.Fatalf("merged Surrogate-Key = %q, want %q", got, tc.want)
			}
		})
	}
}

// A URI tag is one line in L2: control characters in a (decoded) path are
// escaped, anything else is kept as it is.
func TestURITag(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/clients/7", "_uri:/clients/7"},
		{"/a b/ü", "_uri:/a b/ü"},
		{"/a\nb\x7f", "_uri:/a%0Ab%7F"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if got := surrogate.URITag(tc.path); got != tc.want {
				t.Fatalf("URITag(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

// RFC 9111 §4.4: only a reference with the request's origin names a URI
// to invalidate; the default ports of either scheme are the bare host.
func TestSameOriginPath(t *testing.T) {
	base := &url.URL{Path: "/clients/7", RawQuery: "a=1"}
	for _, tc := range []struct {
		ref  string
		want string
		ok   bool
	}{
		{"/clients/8", "/clients/8", true},
		{"8", "/clients/8", true},
		{"../x%2Fy", "/x/y", true},
		{"http://App.example/c/1", "/c/1", true},
		{"https://app.example:443/c/2", "/c/2", true},
		{"http://app.example:80/c/3", "/c/3", true},
		{"http://upstream:8080/c/4", "/c/4", true},
		{"http://app.example:8443/c/5", "", false},
		{"http://evil.example/c/6", "", false},
		{"ftp://app.example/c/7", "", false},
		{"//evil.example/c/8", "", false},
		{"http://[::1", "", false},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			got, ok := surrogate.SameOriginPath(base, tc.ref, "app.example", "upstream:8080")
			if got != tc.want || ok != tc.ok {
				t.Fatalf("SameOriginPath(%q) = %q, %v; want %q, %v", tc.ref, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// EntryURITagsOf, given the prefix and the path in one string, gives the
// tags EntryURITags gives for the path, and takes the string itself as the
// URI tag when the path needs no escaping (a batch element's, built with
// route.PrefixedPathFor), building none.
func TestEntryURITagsOf(t *testing.T) {
	for _, path := range []string{"/users/42", "/Users/42", "/users//42/", "/a\x01b", "/A\x7fB", "", "/users/%2F"} {
		for _, start := range [][]string{nil, {"_route:user"}, {"_route:user", surrogate.URITag(path)}} {
			tagged := surrogate.URITagPrefix + path
			want := surrogate.EntryURITags(slices.Clone(start), path)
			if got := surrogate.EntryURITagsOf(slices.Clone(start), tagged); !slices.Equal(got, want) {
				t.Errorf("EntryURITagsOf(%q, %q) = %q, want %q", start, tagged, got, want)
			}
		}
	}
	tagged := surrogate.URITagPrefix + "/users/42"
	if n := testing.AllocsPerRun(100, func() { _ = surrogate.EntryURITagsOf(make([]string, 0, 4), tagged) }); n > 1 {
		t.Errorf("EntryURITagsOf: %v allocations, want the tags' only", n)
	}
}
