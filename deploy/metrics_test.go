package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

const (
	dashboardFile = "grafana/sidecache-dashboard.json"
	rulesFile     = "prometheus/sidecache-rules.yaml"
)

// metricSpec is one metric family sidecache exports (docs/metrics.md).
type metricSpec struct {
	typ string // counter, gauge or histogram
	// labels maps each label to its allowed values; nil values: any.
	labels map[string][]string
}

// specMetrics is every metric family sidecache exports, with its labels and
// their closed value sets: the one list the dashboard and the alert rules
// are checked against (and a live /metrics can be).
var specMetrics = map[string]metricSpec{
	"sidecache_requests_total": {"counter", map[string][]string{
		"route": nil, "result": {"hit", "miss", "stale", "bypass", "collapsed", "pass"}}},
	"sidecache_request_duration_seconds": {"histogram", map[string][]string{
		"route": nil, "result": {"hit", "miss", "stale", "bypass", "collapsed", "pass"}}},
	"sidecache_cache_lookups_total": {"counter", map[string][]string{
		"tier": {"l1", "l2"}, "result": {"hit", "miss", "error"}}},
	"sidecache_upstream_requests_total": {"counter", map[string][]string{
		"route": nil, "code": {"1xx", "2xx", "3xx", "4xx", "5xx", "error"}}},
	"sidecache_upstream_duration_seconds":        {"histogram", map[string][]string{"route": nil}},
	"sidecache_coalesced_requests_total":         {"counter", map[string][]string{"route": nil}},
	"sidecache_batch_size":                       {"histogram", map[string][]string{"route": nil}},
	"sidecache_batch_isolations_total":           {"counter", map[string][]string{"route": nil}},
	"sidecache_batch_overflow_total":             {"counter", map[string][]string{"route": nil}},
	"sidecache_batch_quarantined":                {"gauge", map[string][]string{"route": nil}},
	"sidecache_batch_quarantine_evictions_total": {"counter", map[string][]string{"route": nil}},
	"sidecache_batch_budget_exhausted_total":     {"counter", map[string][]string{"route": nil}},
	"sidecache_lease_takeovers_total":            {"counter", map[string][]string{"route": nil}},
	"sidecache_coherence_refused_total":          {"counter", map[string][]string{"tier": {"l1", "l2"}}},
	"sidecache_edge_refused_total": {"counter", map[string][]string{
		"reason": {"framing", "asterisk-form", "read-timeout", "loop", "trace", "write-timeout", "send-budget", "header-budget", "tunnel-idle", "tunnel-limit", "malformed", "header-too-large"}}},
	"sidecache_batch_dropped_total": {"counter", map[string][]string{
		"route": nil, "reason": {"queue-full", "deadline", "abandoned"}}},
	"sidecache_batch_too_large_total": {"counter", map[string][]string{
		"route": nil, "kind": {"answer", "list"}}},
	"sidecache_batch_not_stored_total": {"counter", map[string][]string{
		"route": nil, "reason": {"vary-star", "vary-per-request", "vary-withheld", "vary-unnamed", "private", "uncacheable"}}},
	"sidecache_invalidations_total": {"counter", map[string][]string{
		"source": {"write", "purge", "peer"}}},
	"sidecache_invalidations_late_total":             {"counter", nil},
	"sidecache_invalidation_tags_skipped_total":      {"counter", nil},
	"sidecache_invalidation_replay_pending":          {"gauge", nil},
	"sidecache_invalidation_replays_abandoned_total": {"counter", nil},
	"sidecache_tombstones_folded_total":              {"counter", nil},
	"sidecache_l1_bytes":                             {"gauge", nil},
	"sidecache_l1_items":                             {"gauge", nil},
	"sidecache_l2_up":                                {"gauge", nil},
	"sidecache_l2_clock_offset_seconds":              {"gauge", nil},
	"sidecache_l2_epoch_refusals_total":              {"counter", nil},
	"sidecache_l2_writes_refused":                    {"gauge", nil},
	"sidecache_client_connections":                   {"gauge", nil},
	"sidecache_client_connections_max":               {"gauge", nil},
	"sidecache_client_connections_reaped_total":      {"counter", nil},
	"sidecache_client_connection_waits_total":        {"counter", nil},
	"sidecache_client_pending_send_bytes":            {"gauge", nil},
	"sidecache_client_pending_sends":                 {"gauge", nil},
	"sidecache_client_pending_send_bytes_max":        {"gauge", nil},
	"sidecache_client_pending_header_bytes":          {"gauge", nil},
	"sidecache_client_pending_headers":               {"gauge", nil},
	"sidecache_client_pending_header_bytes_max":      {"gauge", nil},
	"sidecache_config_reloads_total": {"counter", map[string][]string{
		"result": {"success", "error", "restart_required"}}},
	"sidecache_build_info": {"gauge", map[string][]string{"version": nil, "goversion": nil}},
}

// targetLabels are added by the scrape (PodMonitor, or the usual
// kubernetes-pods job for annotated pods), not by sidecache.
var targetLabels = []string{"namespace", "pod", "job", "instance", "container"}

// seriesNames lists every series name a scrape of sidecache shows: the
// families above, histograms as their _bucket, _sum and _count series.
func seriesNames() []string {
	var out []string
	for name, m := range specMetrics {
		if m.typ == "histogram" {
			out = append(out, name+"_bucket", name+"_sum", name+"_count")
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// family maps a series name to its metric family: a histogram's _bucket,
// _sum and _count series to the histogram, any other exported name to
// itself. ok is false for a name sidecache does not export (including a
// histogram's bare family name, which is no series).
func family(series string) (name string, ok bool) {
	if m, ok := specMetrics[series]; ok {
		return series, m.typ != "histogram"
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, cut := strings.CutSuffix(series, suffix); cut && specMetrics[base].typ == "histogram" {
			return base, true
		}
	}
	return "", false
}

// grafanaVar matches Grafana's interval variables, which stand where PromQL
// wants a duration; label variables ($namespace) only stand inside strings.
var grafanaVar = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}`)

// promql parses a PromQL expression from a rules file or a Grafana
// dashboard, with Grafana's interval variables replaced by a duration.
func promql(expr string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(grafanaVar.ReplaceAllString(expr, "5m"))
}

// metricNames returns the metric names (series names) an expression
// selects, sorted and without duplicates. It parses the expression with
// Prometheus' own parser, so a syntax error is an error, and a name in a
// by() clause, a label value or a string is never mistaken for a metric.
func metricNames(expr string) ([]string, error) {
	e, err := promql(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, vs := range selectors(e) {
		names = append(names, selectorName(vs))
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func selectors(e parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return "" // a selector without a fixed name: rejected by checkExpr
}

// literalAlternatives splits a regexp that is a plain alternation of
// literals ("hit|stale"); ok is false for anything cleverer.
func literalAlternatives(re string) (alts []string, ok bool) {
	for _, a := range strings.Split(re, "|") {
		if a == "" || regexp.QuoteMeta(a) != a {
			return nil, false
		}
		alts = append(alts, a)
	}
	return alts, true
}

// checkExpr reports every way expr disagrees with specMetrics: syntax,
// metric names, label names and closed label values.
func checkExpr(expr string) []string {
	e, err := promql(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	for _, vs := range selectors(e) {
		series := selectorName(vs)
		fam, ok := family(series)
		if !ok {
			problems = append(problems, fmt.Sprintf("selects %q, which sidecache does not export (series: %v)", series, seriesNames()))
			continue
		}
		spec := specMetrics[fam]
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName || slices.Contains(targetLabels, m.Name) {
				continue
			}
			if m.Name == "le" && strings.HasSuffix(series, "_bucket") {
				continue
			}
			allowed, known := spec.labels[m.Name]
			if !known {
				problems = append(problems, fmt.Sprintf("%s has no label %q", fam, m.Name))
				continue
			}
			if allowed == nil || strings.HasPrefix(m.Value, "$") {
				continue
			}
			values := []string{m.Value}
			if m.Type == labels.MatchRegexp || m.Type == labels.MatchNotRegexp {
				if values, ok = literalAlternatives(m.Value); !ok {
					continue
				}
			}
			for _, v := range values {
				if !slices.Contains(allowed, v) {
					problems = append(problems, fmt.Sprintf("%s{%s}: value %q is not one of %v", fam, m.Name, v, allowed))
				}
			}
		}
	}
	return problems
}

// ruleFile is a Prometheus rules file, and a PrometheusRule's spec.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func TestMetricNames(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`sidecache_l2_up == 0`, []string{"sidecache_l2_up"}},
		{`sum by (route) (rate(sidecache_requests_total{result=~"hit|stale", route=~"$route"}[$__rate_interval]))
		  / sum by (route) (rate(sidecache_requests_total[5m]))`, []string{"sidecache_requests_total"}},
		{`histogram_quantile(0.99, sum by (le, route) (rate(sidecache_request_duration_seconds_bucket[5m])))`,
			[]string{"sidecache_request_duration_seconds_bucket"}},
		{`{__name__="sidecache_l1_bytes"} + on() group_left sidecache_l1_items offset 1d`, []string{"sidecache_l1_bytes", "sidecache_l1_items"}},
		// A label or function name is not a metric.
		{`count by (sidecache_fake) (up{job="sidecache_requests_total"})`, []string{"up"}},
	}
	for _, c := range cases {
		got, err := metricNames(c.expr)
		if err != nil {
			t.Errorf("metricNames(%q): %v", c.expr, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %v, want %v", c.expr, got, c.want)
		}
	}
	if _, err := metricNames(`sum(rate(sidecache_requests_total[5m])`); err == nil {
		t.Errorf("metricNames accepted an unbalanced expression")
	}
	// checkExpr must catch the mistakes it exists for.
	for _, bad := range []string{
		`sidecache_request_total`,
		`sidecache_request_duration_seconds`,
		`sidecache_requests_total{result="hits"}`,
		`sidecache_requests_total{status="hit"}`,
		`rate(sidecache_requests_total{result=~"hit|stale|nope"}[5m])`,
	} {
		if len(checkExpr(bad)) == 0 {
			t.Errorf("checkExpr(%q) found nothing wrong", bad)
		}
	}
}

// dashboard is the part of a Grafana dashboard model this test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource map[string]string `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		Datasource map[string]string `json:"datasource"`
		Expr       string            `json:"expr"`
		RefID      string            `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

var dashVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title")
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] {
		t.Errorf("no datasource variable: the dashboard would be tied to one Grafana's data source")
	}

	used := map[string]bool{}
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q is wider than the grid", p.Title)
			}
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no queries", p.Title)
			}
			if p.Datasource["uid"] != "${datasource}" {
				t.Errorf("panel %q datasource = %v, want the ${datasource} variable", p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				for _, problem := range checkExpr(tg.Expr) {
					t.Errorf("panel %q query %s: %s\n%s", p.Title, tg.RefID, problem, tg.Expr)
				}
				names, _ := metricNames(tg.Expr)
				for _, n := range names {
					if fam, ok := family(n); ok {
						used[fam] = true
					}
				}
				for _, m := range dashVar.FindAllStringSubmatch(tg.Expr, -1) {
					if !strings.HasPrefix(m[1], "__") && !vars[m[1]] {
						t.Errorf("panel %q uses $%s, which is not a dashboard variable", p.Title, m[1])
					}
				}
			}
		}
	}
	walk(d.Panels)
	for name := range specMetrics {
		if !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
}

func TestAlertRules(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	alerts := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without alert: (recording rules are not expected here)", g.Name)
				continue
			}
			alerts[r.Alert] = r.Expr
			for _, problem := range checkExpr(r.Expr) {
				t.Errorf("alert %s: %s", r.Alert, problem)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s needs a severity label and a summary annotation", r.Alert)
			}
		}
	}
	// The four alerts the issue asks for, on the metric each must watch.
	for alert, metric := range map[string]string{
		"SidecacheL2Down":         "sidecache_l2_up",
		"SidecacheHitRatioDrop":   "sidecache_requests_total",
		"SidecacheUpstreamErrors": "sidecache_upstream_requests_total",
		"SidecacheHighLatency":    "sidecache_request_duration_seconds_bucket",
	} {
		names, _ := metricNames(alerts[alert])
		if !slices.Contains(names, metric) {
			t.Errorf("alert %s missing or not on %s", alert, metric)
		}
	}

	// The Operator's copy must not drift from the plain file.
	prData, err := os.ReadFile(monitoringDir + "/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(prData, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	if !reflect.DeepEqual(pr.Spec, rf) {
		t.Errorf("%s/prometheusrule.yaml spec.groups differ from %s; copy the groups over", monitoringDir, rulesFile)
	}
}
