package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the file at path and parses it; path prefixes every error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// Parse is ParseWithEnv with the process environment.
func Parse(data []byte, filename string) (*Config, error) {
	return ParseWithEnv(data, filename, os.LookupEnv)
}

// ParseWithEnv expands ${VAR} references with lookup, decodes the YAML,
// fills defaults and validates. On any problem it returns a nil Config and
// an Errors holding every problem found, in file order. A null value
// ("key:" or "key: ~") counts as unset, so the default applies; omitting
// cache.l2 or leaving it null runs L1-only.
func ParseWithEnv(data []byte, filename string, lookup func(string) (string, bool)) (*Config, error) {
	d := &decoder{lines: map[string]int{}, set: map[string]bool{}, bad: map[string]bool{},
		merging: map[*yaml.Node]bool{}, budget: maxNodes}
	data, d.errs = expandEnv(data, lookup)
	cfg := new(Config)
	if root, ok := d.parse(data); ok {
		if root != nil {
			d.lines[""] = root.Line
			d.value(root, reflect.ValueOf(cfg).Elem(), "")
		}
		setDefaults(cfg, func(path string) bool { return d.set[path] })
		for path := range defaultFrom {
			if !d.set[path] {
				if cfg.defaulted == nil {
					cfg.defaulted = map[string]bool{}
				}
				cfg.defaulted[path] = true
			}
		}
		for _, e := range cfg.validate() {
			from, derived := defaultFrom[e.Path]
			if derived && !d.set[e.Path] && d.isBad(from) {
				continue // the field at fault is reported already
			}
			if !d.isBad(e.Path) {
				e.Line = d.lineOf(e.Path)
				d.errs = append(d.errs, e)
			}
		}
	}
	if len(d.errs) > 0 {
		for _, e := range d.errs {
			e.File = filename
		}
		d.errs.sortByLine()
		return nil, d.errs
	}
	return cfg, nil
}

// defaultFrom names the fields whose default setDefaults copies from
// another field. Left out, such a field is as wrong as its source when
// the source failed to decode (a zero upstream.timeout makes a zero
// lease_ttl): that is one problem, reported once, at the source.
var defaultFrom = map[string]string{
	"cache.l2.lease_ttl":   "upstream.timeout",
	"coherence.write_hold": "coherence.max_lag",
}

// maxNodes bounds the walk: anchors and merge keys let a small file name
// the same subtree exponentially often ("billion laughs"). A real config
// is a few thousand nodes.
const maxNodes = 1 << 20

// decoder walks a yaml.Node tree into a Config by hand, not with
// yaml.Unmarshal, so that it can keep going after a problem (the operator
// sees all of them), record each field's line for later validation errors,
// and tell a field set to zero from one left out.
type decoder struct {
	errs    Errors
	lines   map[string]int  // field path -> line, for every field in the file
	set     map[string]bool // field paths given a non-null value
	bad     map[string]bool // field paths whose value failed to decode
	merging map[*yaml.Node]bool
	budget  int
}

// parse returns the single document's root node (nil for an empty file);
// false means the YAML itself is broken and there is nothing to walk.
func (d *decoder) parse(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		d.errs = append(d.errs, yamlError(err))
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.errs = append(d.errs, yamlError(err))
		} else {
			d.errs = append(d.errs, &Error{Line: extra.Line, Msg: "only one YAML document is allowed"})
		}
		return nil, false
	}
	if len(doc.Content) == 0 {
		return nil, true
	}
	return doc.Content[0], true
}

// yamlError turns "yaml: line 3: msg" into a placed Error.
func yamlError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, tail
			}
		}
	}
	return &Error{Line: line, Msg: "invalid YAML: " + msg}
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.bad[path] = true
	d.errs = append(d.errs, &Error{Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// isBad reports whether path or one of its parents failed to decode; its
// zero value would only repeat the same problem as a validation error.
func (d *decoder) isBad(path string) bool {
	for {
		if d.bad[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parent(path)
	}
}

// lineOf finds the line of path, or of its nearest parent in the file.
func (d *decoder) lineOf(path string) int {
	for {
		if l, ok := d.lines[path]; ok || path == "" {
			return l
		}
		path = parent(path)
	}
}

func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

var (
	durationType = reflect.TypeFor[Duration]()
	sizeType     = reflect.TypeFor[Size]()
)

// value decodes n into v, recording each problem under path and moving on.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	if d.budget--; d.budget == 0 {
		d.fail(n, path, "document is too large or aliases too much")
	}
	if n = resolve(n); n == nil || d.budget <= 0 || n.Kind == yaml.AliasNode {
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	d.set[path] = true
	switch t := v.Type(); {
	case t == durationType || t == sizeType:
		if n.Kind != yaml.ScalarNode {
			what := "size"
			if t == durationType {
				what = "duration"
			}
			d.fail(n, path, "expected a %s, got %s", what, describe(n))
			return
		}
		u := v.Addr().Interface().(interface{ UnmarshalText([]byte) error })
		if err := u.UnmarshalText([]byte(n.Value)); err != nil {
			d.fail(n, path, "%s", err.Error())
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, v.Elem(), path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			d.lines[p] = item.Line
			d.value(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.fail(n, path, "expected an integer, got %s", describe(n))
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
			d.fail(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	default:
		panic("config: no decoder for " + v.Type().String()) // a new field type needs a case above
	}
}

// mapping decodes a YAML mapping into struct v by its yaml tags.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	// Merge keys (<<: *defaults) first, so the mapping's own keys win.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolve(n.Content[i]); k.ShortTag() == "!!merge" {
			d.merge(n.Content[i+1], v, path)
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errs = append(d.errs, &Error{Line: k.Line, Path: path, Msg: "expected a field name, got " + describe(k)})
			continue
		}
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, p, "duplicate field (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		f, ok := fieldByTag(v.Type(), k.Value)
		if !ok {
			d.fail(k, p, "unknown field%s", suggest(v.Type(), k.Value))
			continue
		}
		d.lines[p] = k.Line
		d.value(val, v.Field(f), p)
	}
}

// merge applies a << value: one mapping, or a list of them where the
// earlier ones win (YAML merge key spec), hence the reverse order.
func (d *decoder) merge(n *yaml.Node, v reflect.Value, path string) {
	n = resolve(n)
	if d.merging[n] {
		d.fail(n, path, "merge key refers to itself")
		return
	}
	d.merging[n] = true
	defer delete(d.merging, n)
	if n.Kind == yaml.SequenceNode {
		for i := len(n.Content) - 1; i >= 0; i-- {
			d.value(n.Content[i], v, path)
		}
		return
	}
	d.value(n, v, path)
}

func fieldByTag(t reflect.Type, name string) (int, bool) {
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			continue // not a field of the file (Config.defaulted)
		}
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag == name {
			return i, true
		}
	}
	return 0, false
}

// suggest names the closest known field when the typo is small.
func suggest(t reflect.Type, name string) string {
	best, bestDist := "", 3
	for i := 0; i < t.NumField() && len(name) <= 64; i++ {
		if !t.Field(i).IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if dist := editDistance(name, tag); dist < bestDist {
			best, bestDist = tag, dist
		}
	}
	if best == "" || len(name) < 3 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance, for the short field names only.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}
