package server_test

import (
	"bufio"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// TestDemoConfigSeries (issue 22, item 5): a fresh process on the demo
// config creates only series that can occur — no batch series on routes
// that do not batch, no hit results on write routes, no lease or L2 series
// without Redis — and their number is the one docs/metrics.md states.
func TestDemoConfigSeries(t *testing.T) {
	o := newOrigin(t)
	yaml, err := os.ReadFile("../../config/sidecache.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SIDECACHE_LISTEN": "127.0.0.1:0", "SIDECACHE_ADMIN_LISTEN": "127.0.0.1:0", "UPSTREAM_URL": o.URL}
	cfg, err := config.ParseWithEnv(yaml, "sidecache.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	r := runServer(t, cfg, server.Options{Logger: slog.New(slog.DiscardHandler), WatchInterval: -1})
	series := scrapeSeries(t, r.admin+"/metrics")

	for _, s := range series {
		for _, bad := range []string{
			`sidecache_requests_total{result="hit",route="client-write"}`,
			`sidecache_requests_total{result="hit",route="_pass"}`,
			`sidecache_batch_size_count{route="client"}`,
			`sidecache_coalesced_requests_total{route="client-write"}`,
			`sidecache_batch_isolations_total{route="users-list"}`,
			`sidecache_lease_takeovers_total`,
			`tier="l2"`,
			`source="peer"`,
		} {
			if strings.Contains(s, bad) {
				t.Errorf("series %s cannot occur on the demo config", s)
			}
		}
	}
	for _, want := range []string{
		`sidecache_requests_total{result="hit",route="client"}`,
		`sidecache_requests_total{result="pass",route="client-write"}`,
		`sidecache_batch_size_count{route="user"}`,
		`sidecache_cache_lookups_total{result="hit",tier="l1"}`,
	} {
		found := false
		for _, s := range series {
			found = found || strings.HasPrefix(s, want)
		}
		if !found {
			t.Errorf("series %s missing: it can occur, so it starts at zero", want)
		}
	}

	t.Logf("%d sidecache_* series", len(series))
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`a fresh process exports \*\*(\d+)\*\* ` + "`sidecache_\\*`").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/metrics.md does not state the demo config's series count")
	}
	if stated, _ := strconv.Atoi(string(m[1])); stated != len(series) {
		t.Errorf("docs/metrics.md states %d sidecache_* series for the demo config; a fresh process has %d", stated, len(series))
	}
}

// scrapeSeries returns the sidecache_* sample lines of an exposition.
func scrapeSeries(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "sidecache_") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
