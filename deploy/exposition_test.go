package deploy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// selects reports whether vs would select s in Prometheus, leaving out the
// matchers sidecache cannot satisfy: scrape target labels and Grafana
// variables, which the scrape and the dashboard fill in.
func selects(vs *parser.VectorSelector, s liveSample) bool {
	for _, m := range vs.LabelMatchers {
		switch {
		case m.Name == labels.MetricName:
			if !m.Matches(s.name) {
				return false
			}
		case slices.Contains(targetLabels, m.Name), strings.Contains(m.Value, "$"):
		default:
			if !m.Matches(s.labels[m.Name]) {
				return false
			}
		}
	}
	return true
}

// liveSample is one line of a Prometheus text exposition.
type liveSample struct {
	name   string
	labels map[string]string
	value  float64
}

// value returns the sum of the samples called name whose labels include
// every name, value pair in kv; NaN when there is none.
func value(samples []liveSample, name string, kv ...string) float64 {
	sum, found := 0.0, false
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if s.labels[kv[i]] != kv[i+1] {
				continue next
			}
		}
		sum, found = sum+s.value, true
	}
	if !found {
		return math.NaN()
	}
	return sum
}

// parseExposition reads the text format (version 0.0.4) strictly enough
// for what sidecache writes: name{label="value",...} value.
func parseExposition(text string) ([]liveSample, error) {
	var out []liveSample
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		s := liveSample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, fmt.Errorf("bad line %q", line)
		}
		s.name, line = line[:i], line[i:]
		if line[0] == '{' {
			line = line[1:]
			for line != "" && line[0] != '}' {
				eq := strings.Index(line, `="`)
				if eq < 0 {
					return nil, fmt.Errorf("bad labels in %s", s.name)
				}
				name := line[:eq]
				v, rest, err := unquoteLabel(line[eq+1:])
				if err != nil {
					return nil, fmt.Errorf("%s{%s}: %w", s.name, name, err)
				}
				s.labels[name] = v
				line = strings.TrimPrefix(rest, ",")
			}
			line = strings.TrimPrefix(line, "}")
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil, fmt.Errorf("%s: no value", s.name)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, nil
}

// unquoteLabel reads a quoted label value at the start of s (escapes \\,
// \" and \n) and returns it and the rest of s.
func unquoteLabel(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i++; i < len(s) && s[i] == 'n' {
				b.WriteByte('\n')
			} else if i < len(s) {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", errors.New("unterminated label value")
}
