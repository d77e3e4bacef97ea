package writeinv

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

// FuzzListIDs: the ids a bulk write names are within the bound, each
// once, trimmed and not empty, and cover every id net/url's reading of the
// query names (a lenient reading reads at least what Go's does).
func FuzzListIDs(f *testing.F) {
	for _, s := range []string{"ids=1,2", "ids=1&ids=2", "ids[]=1;IDS[0]=%202,,", "ids=%zz,1", "x=1&ids=", "ids=1%2C2", "ids=+1+,2", "ids[a][b]=1&ids[=2"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, raw string, maxIDs int) {
		maxIDs = 1 + int(uint(maxIDs)%50)
		ids, ok := listIDs(raw, "ids", maxIDs)
		if !ok {
			if ids != nil {
				t.Fatalf("over the bound, yet ids %q", ids)
			}
			return
		}
		if len(ids) > maxIDs {
			t.Fatalf("%d ids, bound %d", len(ids), maxIDs)
		}
		for i, id := range ids {
			if id == "" || id != strings.TrimSpace(id) || slices.Contains(ids[:i], id) {
				t.Fatalf("id %q in %q", id, ids)
			}
		}
		q, _ := url.ParseQuery(raw)
		for _, v := range q["ids"] {
			for id := range strings.SplitSeq(v, ",") {
				if id = strings.TrimSpace(id); id != "" && !slices.Contains(ids, id) {
					t.Fatalf("%q: Go reads id %q, the lenient reading %q lacks it", raw, id, ids)
				}
			}
		}
	})
}
