package config

import (
	"sort"
	"strconv"
	"strings"
)

// Error is one problem in a config, placed as precisely as known, so an
// operator can jump to it: "config/x.yaml:12: routes[1].ttl: invalid
// duration "5x"".
type Error struct {
	File string // empty when validating a Config built in code
	Line int    // 1-based; 0 when unknown
	Path string // field path such as "routes[1].batch.id_field"; empty for file-level problems
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found at once. Parse and Validate return it as
// their error (never empty); errors.As reaches each *Error through Unwrap.
type Errors []*Error

// Error prints one problem per line.
func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// err returns es as an error, or a true nil when there is nothing to report
// (a nil Errors in an error interface would not compare equal to nil).
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// sortByLine puts problems in file order; those with no known line go last,
// in the order they were found.
func (es Errors) sortByLine() {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i].Line, es[j].Line
		return a != 0 && (b == 0 || a < b)
	})
}
