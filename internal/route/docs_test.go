package route

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cachekey"
)

// jsonFields flattens the field names of decoded JSON objects: nested
// objects as parent.child ("key.host", "batch.max_wait").
func jsonFields(prefix string, v any, out map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, e := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out[p] = true
		jsonFields(p, e, out)
	}
}

// TestRoutesJSONMatchesDocs: the fields GET /routes writes are the ones
// docs/admin-api.md shows. Every field the code writes for routes using
// every option appears in the page's example or its field table, and every
// field of the example is one the code writes.
func TestRoutesJSONMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/admin-api.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(doc[strings.Index(string(doc), "## `GET /routes`"):]), "\n## ")
	_, example, ok := strings.Cut(section, "```json\n")
	if !ok {
		t.Fatal("docs/admin-api.md: no json example under GET /routes")
	}
	example, _, _ = strings.Cut(example, "```")
	var documented []map[string]any
	if err := json.Unmarshal([]byte(example), &documented); err != nil {
		t.Fatalf("docs/admin-api.md: GET /routes example: %v", err)
	}
	inExample := map[string]bool{}
	for _, r := range documented {
		jsonFields("", r, inExample)
	}
	// The field table names fields as code spans in its first column,
	// nested ones either whole (`key.host`) or inside their object's row.
	inTable := map[string]bool{}
	cell := regexp.MustCompile("`([a-z_.]+)`")
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			for _, m := range cell.FindAllStringSubmatch(line, -1) {
				inTable[m[1]] = true
			}
		}
	}

	specs := append(specExample(), Spec{Name: "all", Pattern: "/all/{id}", TTL: time.Minute,
		Origin: &Origin{MaxTTL: time.Hour}, RequestNoCache: "refresh", Key: cachekey.Options{AllQuery: true},
		Batch: &Batch{Path: "/all", Param: "ids", IDField: "id", ETagField: "v", MaxSize: 10, MaxWait: time.Millisecond, MaxInFlight: 2}})
	b, err := json.Marshal(mustCompile(t, specs).Routes())
	if err != nil {
		t.Fatal(err)
	}
	var written []map[string]any
	if err := json.Unmarshal(b, &written); err != nil {
		t.Fatal(err)
	}
	fromCode := map[string]bool{}
	for _, r := range written {
		jsonFields("", r, fromCode)
	}
	var undocumented, unknown []string
	for f := range fromCode {
		leaf := f[strings.LastIndex(f, ".")+1:]
		if !inExample[f] && !inTable[f] && !inTable[leaf] {
			undocumented = append(undocumented, f)
		}
	}
	for f := range inExample {
		if !fromCode[f] {
			unknown = append(unknown, f)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unknown)
	for _, f := range undocumented {
		t.Errorf("GET /routes writes %q; docs/admin-api.md neither shows nor describes it", f)
	}
	for _, f := range unknown {
		t.Errorf("docs/admin-api.md's GET /routes example shows %q, which the code never writes", f)
	}
}
