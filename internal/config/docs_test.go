package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/httpcache"
)

// glanceRow is one row of docs/configuration.md's "All fields at a glance"
// table: the field's path and the first code span of its default column
// ("" when the default is prose, such as "— (required)").
type glanceRow struct {
	path, def string
	line      int
}

var (
	glanceField = regexp.MustCompile("^\\| \\[`([^`]+)`\\]\\([^)]*\\) \\|[^|]*\\| ([^|]*) \\|")
	firstSpan   = regexp.MustCompile("^`([^`]*)`")
)

func glanceTable(t *testing.T) []glanceRow {
	t.Helper()
	data, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	var rows []glanceRow
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## All fields at a glance"):
			in = true
		case in && strings.HasPrefix(line, "## "):
			return rows
		case in:
			// An escaped pipe (`text` \| `json`) is part of a cell.
			if m := glanceField.FindStringSubmatch(strings.ReplaceAll(line, `\|`, "/")); m != nil {
				def := ""
				if d := firstSpan.FindStringSubmatch(strings.TrimSpace(m[2])); d != nil {
					def = d[1]
				}
				rows = append(rows, glanceRow{m[1], def, i + 1})
			}
		}
	}
	t.Fatal(`docs/configuration.md has no "## All fields at a glance" section`)
	return nil
}

// yamlLeaves returns every field path a config file can set, as the docs
// spell them (routes[].key.host), with its reflect.Value in v; blocks
// (structs, pointers to structs, lists of structs) are listed too, in
// blocks.
func yamlLeaves(prefix string, v reflect.Value, leaves map[string]reflect.Value, blocks map[string]bool) {
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			blocks[p] = true
			yamlLeaves(p, f, leaves, blocks)
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			blocks[p] = true
			if f.IsNil() {
				f = reflect.New(f.Type().Elem())
			}
			yamlLeaves(p, f.Elem(), leaves, blocks)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			blocks[p] = true
			e := reflect.New(f.Type().Elem()).Elem()
			if f.Len() > 0 {
				e = f.Index(0)
			}
			yamlLeaves(p+"[]", e, leaves, blocks)
		default:
			leaves[p] = f
		}
	}
}

// TestGlanceTableCoversConfig: every field the decoder accepts is a row of
// the docs' field table, and every row names a field the decoder accepts,
// so a field added to Config without its documentation (or a renamed one
// left behind in the docs) fails here.
func TestGlanceTableCoversConfig(t *testing.T) {
	leaves, blocks := map[string]reflect.Value{}, map[string]bool{}
	yamlLeaves("", reflect.ValueOf(Config{}), leaves, blocks)
	rows := glanceTable(t)
	documented := map[string]bool{}
	for _, r := range rows {
		documented[r.path] = true
		if _, ok := leaves[r.path]; !ok && !blocks[r.path] {
			t.Errorf("docs/configuration.md:%d: %s is not a config field", r.line, r.path)
		}
	}
	var missing []string
	for p := range leaves {
		if !documented[p] {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		t.Errorf("config field %s has no row in docs/configuration.md's field table", p)
	}
}

// TestGlanceTableDefaults: the default the docs' field table states is the
// one setDefaults fills in, for every field whose default is a literal.
// A file with every optional block present (so its defaults are filled)
// and nothing else set is parsed, and each documented literal is decoded
// as the file would be and compared with the parsed value.
func TestGlanceTableDefaults(t *testing.T) {
	const file = `
upstream: {url: "http://127.0.0.1:3000"}
cache:
  l2:
    redis: {addrs: ["127.0.0.1:6379"]}
routes:
  - name: a
    path: /a/{id}
    ttl: 1s
    batch: {path: /a, param: ids, id_field: id}
  - name: b
    path: /b
    split: {param: ids, route: a}
`
	cfg, err := ParseWithEnv([]byte(file), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	leaves, blocks := map[string]reflect.Value{}, map[string]bool{}
	yamlLeaves("", reflect.ValueOf(*cfg), leaves, blocks)
	// The split route is routes[1]; yamlLeaves walks routes[0].
	split := reflect.ValueOf(*cfg.Routes[1].Split)
	leaves["routes[].split.max_ids"] = split.FieldByName("MaxIDs")
	checked := 0
	for _, r := range glanceTable(t) {
		got, ok := leaves[r.path]
		if !ok || r.def == "" || strings.Contains(r.def, ".") && !strings.ContainsAny(r.def, "0123456789") {
			continue // a block, prose, or another field's name (upstream.timeout)
		}
		if got.Kind() == reflect.Pointer {
			got = got.Elem()
		}
		if r.path == "routes[].targeted_fields" && got.IsNil() {
			// nil stands for httpcache's list, applied where origin
			// freshness reads it (an empty list means Cache-Control only).
			got = reflect.ValueOf(httpcache.DefaultTargets)
		}
		want, err := docValue(got.Type(), r.def)
		if err != nil {
			continue // a default named by another field (max_lag) or by prose
		}
		checked++
		if g := got.Interface(); !reflect.DeepEqual(g, want) {
			t.Errorf("docs/configuration.md:%d: %s: the docs say the default is %s, the code fills %v", r.line, r.path, r.def, g)
		}
	}
	if checked < 40 {
		t.Errorf("only %d literal defaults checked; the table's shape changed?", checked)
	}
}

// docValue decodes a default as the docs write it, into the field's type.
func docValue(t reflect.Type, s string) (any, error) {
	switch t {
	case reflect.TypeOf(Duration(0)):
		return parseDuration(s)
	case reflect.TypeOf(Size(0)):
		return parseSize(s)
	}
	switch t.Kind() {
	case reflect.String:
		return strings.Trim(s, `"`), nil
	case reflect.Bool:
		return strconv.ParseBool(s)
	case reflect.Int:
		return strconv.Atoi(s)
	case reflect.Slice:
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
			return nil, strconv.ErrSyntax
		}
		var out []string
		for _, e := range strings.Split(strings.Trim(s, "[]"), ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return reflect.Zero(t).Interface(), nil
		}
		return out, nil
	}
	return nil, strconv.ErrSyntax
}
