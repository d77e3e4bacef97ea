package forward_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/forward"
)

func never(k string) bool {
	return k == "Connection" || k == "If-None-Match" || strings.HasPrefix(k, "X-Forwarded-")
}

func rules(all bool, log *bytes.Buffer) *forward.Rules {
	c := forward.Config{Route: "r", All: all, Keyed: []string{"X-Tenant"}, Never: never}
	if log != nil {
		c.Log = slog.New(slog.NewTextHandler(log, nil))
	}
	return forward.New(c)
}

// By default only what the key holds reaches the upstream, plus the
// normalised Accept-Encoding; forward_headers: all forwards everything but
// what is never forwarded. The client's request id and trace context are
// never forwarded, whatever the route says (the sidecar writes its own).
func TestCopy(t *testing.T) {
	src := http.Header{
		"X-Tenant":        {"a"},
		"Accept-Encoding": {"br;q=0.1, gzip"},
		"Traceparent":     {"00-1-2-01"},
		"X-Request-Id":    {"r1"},
		"X-Original-Url":  {"/admin"},
		"Accept-Language": {"de"},
		"Connection":      {"close"},
		"If-None-Match":   {`"1"`},
		"X-Forwarded-For": {"6.6.6.6"},
	}
	for _, tc := range []struct {
		name string
		all  bool
		want []string
	}{
		{"keyed only", false, []string{"Accept-Encoding", "X-Tenant"}},
		{"all", true, []string{"Accept-Encoding", "Accept-Language", "X-Original-Url", "X-Tenant"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := http.Header{}
			rules(tc.all, nil).Copy(dst, src)
			got := slices.Sorted(maps.Keys(dst))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("forwarded %q, want %q", got, tc.want)
			}
			if ae, want := dst.Get("Accept-Encoding"), cachekey.ForwardAcceptEncoding(src["Accept-Encoding"]); ae != want {
				t.Fatalf("Accept-Encoding %q, want the storable codings the client accepts: %q", ae, want)
			}
		})
	}
}

// A withheld header is logged once per route and name, and at most 64
// names are ever logged, whatever clients send.
func TestCopyLogsWithheldBounded(t *testing.T) {
	var log bytes.Buffer
	f := rules(false, &log)
	for range 3 {
		for i := range 100 {
			f.Copy(http.Header{}, http.Header{fmt.Sprintf("X-H%d", i): {"v"}, "Connection": {"close"}})
		}
	}
	if n := strings.Count(log.String(), "not forwarded"); n != 64 {
		t.Fatalf("logged %d withheld headers, want 64", n)
	}
	if strings.Contains(log.String(), "header=Connection") {
		t.Fatal("a never-forwarded header was logged")
	}
}

// A header an answer varies on is learned when the request carried it,
// at most 32 per route; a learned header is then forwarded.
func TestLearnVary(t *testing.T) {
	f := rules(false, &bytes.Buffer{})
	h := http.Header{"Accept-Language": {"de"}, "X-Tenant": {"a"}}
	for _, tc := range []struct {
		name              string
		vary              []string
		withheld, learned bool
	}{
		{"keyed", []string{"X-Tenant"}, false, false},
		{"not sent", []string{"X-Other"}, false, false},
		{"withheld", []string{"Accept-Language"}, true, true},
		{"learned", []string{"Accept-Language"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.Withheld(h, tc.vary); got != tc.withheld {
				t.Fatalf("Withheld = %v, want %v", got, tc.withheld)
			}
			if got := f.LearnVary(h, tc.vary); got != tc.learned {
				t.Fatalf("LearnVary = %v, want %v", got, tc.learned)
			}
		})
	}
	if !f.Forwards("Accept-Language") {
		t.Fatal("a learned header is not forwarded")
	}
	many := http.Header{}
	var names []string
	for i := range 40 {
		n := fmt.Sprintf("X-V%d", i)
		many[n] = []string{"v"}
		names = append(names, n)
	}
	f.LearnVary(many, names)
	learned := 1 // Accept-Language
	for _, n := range names {
		if f.Forwards(n) {
			learned++
		}
	}
	if learned != 32 {
		t.Fatalf("learned %d headers, want the bound of 32", learned)
	}
}

// Requests share a batch when the host and the headers that can change the
// answer agree; the headers that cannot (Accept, tracing, ...) are ignored
// unless keyed.
func TestGroup(t *testing.T) {
	base := http.Header{"X-Tenant": {"a"}, "Accept": {"*/*"}}
	g := rules(true, nil).Group("App.example", base)
	for _, tc := range []struct {
		name string
		host string
		h    http.Header
		same bool
	}{
		{"same", "app.example", http.Header{"Accept": {"text/html"}, "X-Tenant": {"a"}}, true},
		{"tracing ignored", "app.example", http.Header{"X-Tenant": {"a"}, "Traceparent": {"x"}, "X-B3-Traceid": {"y"}}, true},
		{"never forwarded ignored", "app.example", http.Header{"X-Tenant": {"a"}, "X-Forwarded-For": {"1.2.3.4"}}, true},
		{"keyed differs", "app.example", http.Header{"X-Tenant": {"b"}}, false},
		{"forwarded differs", "app.example", http.Header{"X-Tenant": {"a"}, "Accept-Language": {"de"}}, false},
		{"host differs", "other.example", http.Header{"X-Tenant": {"a"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules(true, nil).Group(tc.host, tc.h) == g; got != tc.same {
				t.Fatalf("same group = %v, want %v", got, tc.same)
			}
		})
	}
	// Not forwarded without forward_headers: all, so it cannot split a batch.
	if rules(false, nil).Group("h", http.Header{"Accept-Language": {"de"}}) != rules(false, nil).Group("h", nil) {
		t.Fatal("a withheld header splits the batch")
	}
}

// The headers the sidecar writes itself are never forwarded from the
// client, never learned from a Vary, and make a Vary naming them one no
// key can hold.
func TestOwnHeaders(t *testing.T) {
	for _, all := range []bool{false, true} {
		f := forward.New(forward.Config{Route: "r", All: all, Keyed: []string{"X-Request-Id"}})
		h := http.Header{"X-Forwarded-For": {"6.6.6.6"}, "Via": {"1.1 evil"}, "Forwarded": {"for=1"},
			"X-Request-Id": {"<script>"}, "Traceparent": {"00-1-2-01"}, "Tracestate": {"a=b"}}
		dst := http.Header{}
		f.Copy(dst, h)
		if len(dst) != 0 {
			t.Errorf("all=%v: forwarded the client's %v", all, slices.Sorted(maps.Keys(dst)))
		}
		names := slices.Sorted(maps.Keys(h))
		if f.Withheld(h, names) || f.LearnVary(h, names) {
			t.Errorf("all=%v: the sidecar's own headers read as withheld or learnable", all)
		}
		for _, n := range names {
			if !forward.VariesOnOwn([]string{"Accept-Language", n}) {
				t.Errorf("VariesOnOwn misses %s", n)
			}
		}
	}
	if forward.VariesOnOwn([]string{"Accept-Language", "X-Tenant"}) {
		t.Error("VariesOnOwn on headers the client sends")
	}
}

// SentWithout judges an answer by the header its fetch sent (issue 20.9):
// a header learned after the fetch left does not make it the client's
// variant, and the sidecar's own headers are never the client's to send.
func TestSentWithout(t *testing.T) {
	client := http.Header{"X-Tenant": {"globex"}, "Accept-Language": {"fr"}, "Forwarded": {"for=1.2.3.4"}}
	for _, c := range []struct {
		sent  http.Header
		names []string
		want  bool
	}{
		{http.Header{}, []string{"X-Tenant"}, true},
		{http.Header{"X-Tenant": {"globex"}}, []string{"X-Tenant"}, false},
		{http.Header{"X-Tenant": {"globex"}}, []string{"Accept-Language", "X-Tenant"}, true},
		{http.Header{}, []string{"X-Api-Key"}, false}, // the client sent none
		{http.Header{}, []string{"Forwarded"}, false}, // the sidecar's own
	} {
		if got := forward.SentWithout(client, c.sent, c.names); got != c.want {
			t.Errorf("SentWithout(sent %v, vary %v) = %v, want %v", c.sent, c.names, got, c.want)
		}
	}
}

// What counts as sent is what goes on the wire. internal/upreq sets an
// empty User-Agent on every fetch that forwards none, so that Go adds
// none of its own: nothing goes. On the old code SentWithout took that
// empty value for a User-Agent sent, so an answer that varies on
// User-Agent, made for none, was stored as the variant of the client's
// (and the route never learned to forward it). net/http's Request.write
// sends the first User-Agent only, and none when it is empty; a client's
// empty one is none too (no fetch could send it), and teaches nothing.
func TestSentWithoutUserAgent(t *testing.T) {
	ua := []string{"User-Agent"}
	mobile := http.Header{"User-Agent": {"mobile/1.0"}}
	for _, c := range []struct {
		name         string
		client, sent http.Header
		want         bool
	}{
		{"the sidecar's empty mark sends none", mobile, http.Header{"User-Agent": {""}}, true},
		{"no User-Agent in the call", mobile, http.Header{}, true},
		{"forwarded", mobile, http.Header{"User-Agent": {"mobile/1.0"}}, false},
		{"an empty first line sends none", mobile, http.Header{"User-Agent": {"", "mobile/1.0"}}, true},
		{"the client's empty one is none", http.Header{"User-Agent": {""}}, http.Header{"User-Agent": {""}}, false},
		{"the client sent none", http.Header{}, http.Header{"User-Agent": {""}}, false},
	} {
		if got := forward.SentWithout(c.client, c.sent, ua); got != c.want {
			t.Errorf("%s: SentWithout(client %q, sent %q) = %v, want %v", c.name, c.client, c.sent, got, c.want)
		}
	}
	for _, c := range []struct {
		h    http.Header
		n    string
		want []string
	}{
		{http.Header{"User-Agent": {""}}, "User-Agent", nil},
		{http.Header{"User-Agent": {"a", "b"}}, "User-Agent", []string{"a"}},
		{http.Header{"User-Agent": {"", "b"}}, "User-Agent", nil},
		{http.Header{"User-Agent": {}}, "User-Agent", nil},
		{http.Header{"X-Tenant": {""}}, "X-Tenant", []string{""}}, // Header.Write sends an empty value
		{http.Header{"X-Tenant": {"a", "b"}}, "X-Tenant", []string{"a", "b"}},
		{http.Header{}, "X-Tenant", nil},
	} {
		if got := forward.SentValues(c.h, c.n); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("SentValues(%q, %s) = %q, want %q", c.h, c.n, got, c.want)
		}
	}
	f := rules(false, &bytes.Buffer{})
	if f.LearnVary(http.Header{"User-Agent": {""}}, ua) || f.Forwards("User-Agent") {
		t.Error("a client's empty User-Agent taught the route to forward User-Agent")
	}
	if f.Withheld(http.Header{"User-Agent": {""}}, ua) {
		t.Error("a client's empty User-Agent counted as withheld")
	}
	// Once the route learned User-Agent, a fetch whose client sent none
	// carries upreq's empty one, which sends nothing: its answer, whose
	// Vary does not name User-Agent, was shaped by no User-Agent and is
	// stored (on the old code it was refused as vary-unnamed).
	f.LearnVary(mobile, ua)
	if f.SentUnvaried(http.Header{"User-Agent": {""}}, nil) {
		t.Error("a fetch that sent no User-Agent refused as one that carried a learned header")
	}
	if !f.SentUnvaried(mobile, nil) {
		t.Error("a fetch that sent the learned User-Agent, answered without naming it, not refused")
	}
}

// SentUnvaried: a fetch that carried a header learned from Vary, whose
// answer's Vary does not name it, is refused; a keyed header, a learned
// one the answer names, and a fetch without any learned header are not.
// The first refusal per route and header is logged, once.
func TestSentUnvaried(t *testing.T) {
	log := &bytes.Buffer{}
	f := rules(false, log) // keys X-Tenant
	f.LearnVary(http.Header{"Accept-Language": {"fr"}, "Accept": {"text/html"}}, []string{"Accept", "Accept-Language"})
	for _, c := range []struct {
		name  string
		sent  http.Header
		names []string
		want  bool
	}{
		{"no learned header sent", http.Header{"X-Tenant": {"a"}, "Accept-Encoding": {"gzip"}}, nil, false},
		{"learned, named", http.Header{"Accept-Language": {"fr"}}, []string{"Accept-Language"}, false},
		{"learned, named with others", http.Header{"Accept-Language": {"fr"}}, []string{"Accept-Encoding", "Accept-Language"}, false},
		{"learned, not named", http.Header{"Accept-Language": {"fr"}}, nil, true},
		{"learned, another named", http.Header{"Accept-Language": {"fr"}, "X-Tenant": {"a"}}, []string{"X-Tenant"}, true},
		{"keyed, not named", http.Header{"X-Tenant": {"a"}}, []string{"Accept-Encoding"}, false},
		{"learned, set by the caller", http.Header{"Accept": {"application/json"}}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := f.SentUnvaried(c.sent, c.names, "Accept"); got != c.want {
				t.Errorf("SentUnvaried(sent %v, vary %v) = %v, want %v", c.sent, c.names, got, c.want)
			}
		})
	}
	if n := strings.Count(log.String(), "answer not stored"); n != 1 {
		t.Errorf("refusal logged %d times, want once:\n%s", n, log)
	}
}

// Only a withheld header that can shape an answer is a WARN: headers that
// describe the client or frame a body the cached path never sends
// (User-Agent, Accept, Cache-Control, Content-Length of a bodiless GET) are
// said at debug level only.
func TestWithheldWarnsOnlyForHeadersThatMatter(t *testing.T) {
	var log bytes.Buffer
	f := rules(false, &log)
	f.Copy(http.Header{}, http.Header{
		"X-Api-Key": {"k"}, "User-Agent": {"curl/8"}, "Accept": {"*/*"},
		"Cache-Control": {"max-age=0"}, "Content-Length": {"0"},
	})
	var warned []string
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if _, h, ok := strings.Cut(line, "header="); ok && strings.Contains(line, "level=WARN") {
			warned = append(warned, h)
		}
	}
	if !slices.Equal(warned, []string{"X-Api-Key"}) {
		t.Errorf("WARNed for %v, want X-Api-Key only", warned)
	}
}

// BenchmarkGroup is the batch group of a request with a browser's headers,
// built once per batched request.
func BenchmarkGroup(b *testing.B) {
	f := rules(true, nil)
	h := http.Header{"X-Tenant": {"a"}, "Accept": {"*/*"}, "Authorization": {"Bearer abcdefghijklmnopqrstuvwxyz"},
		"User-Agent": {"Mozilla/5.0"}, "Accept-Language": {"en-GB,en;q=0.9"}, "Traceparent": {"00-1-2-01"}}
	b.ReportAllocs()
	for b.Loop() {
		f.Group("app.example", h)
	}
}

// groupOf is Group as its doc says it: the host and every header of h
// that Grouped counts, sorted, with its values. Group looks up only the
// route's few grouped names when it can; it must build the same string.
func groupOf(f *forward.Rules, host string, h http.Header) string {
	var names []string
	for k := range h {
		if f.Grouped(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	s := strings.ToLower(host)
	for _, k := range names {
		s += "\n" + k
		for _, v := range h[k] {
			s += "\x00" + v
		}
	}
	return s
}

// TestGroupMatchesGrouped: on random headers, before and after headers are
// learned from a Vary, Group is the string groupOf builds, so requests
// differing in a header the group counts never share a bulk call however
// Group finds those headers.
func TestGroupMatchesGrouped(t *testing.T) {
	pool := []string{"X-Tenant", "Accept-Language", "Accept", "Accept-Encoding", "Authorization", "Connection",
		"X-Forwarded-For", "Traceparent", "X-Request-Id", "Via", "User-Agent", "X-B3-Traceid", "x-tenant", "Cookie", "If-None-Match"}
	learn := [][]string{nil, {"Accept-Language"}, {"Cookie", "User-Agent", "Connection"}, {"Authorization", "Accept"}}
	seed := uint64(1)
	next := func(n int) int { // a fixed LCG: the same cases every run
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	for _, all := range []bool{false, true} {
		for _, keyed := range [][]string{nil, {"X-Tenant"}, {"X-Tenant", "User-Agent", "Via"}} {
			f := forward.New(forward.Config{Route: "r", All: all, Keyed: keyed, Never: never,
				Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
			for _, vary := range learn {
				f.LearnVary(http.Header{"Accept-Language": {"x"}, "Cookie": {"x"}, "User-Agent": {"x"},
					"Connection": {"x"}, "Authorization": {"x"}, "Accept": {"x"}}, vary)
				for range 200 {
					h := http.Header{}
					for range next(6) {
						k := pool[next(len(pool))]
						for range next(3) {
							h[k] = append(h[k], fmt.Sprint(next(3)))
						}
						if h[k] == nil && next(2) == 0 {
							h[k] = []string{}
						}
					}
					host := []string{"App.example", "app.example", ""}[next(3)]
					if got, want := f.Group(host, h), groupOf(f, host, h); got != want {
						t.Fatalf("all=%v keyed=%v learned %v: Group(%q, %v) = %q, want %q", all, keyed, vary, host, h, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkGroupKeyed is BenchmarkGroup on a route that forwards only what
// it keys (the default): the group looks up the keyed names alone.
func BenchmarkGroupKeyed(b *testing.B) {
	f := rules(false, nil)
	h := http.Header{"Accept": {"*/*"}, "Authorization": {"Bearer abcdefghijklmnopqrstuvwxyz"},
		"User-Agent": {"Mozilla/5.0"}, "Accept-Language": {"en-GB,en;q=0.9"}, "Traceparent": {"00-1-2-01"}}
	b.ReportAllocs()
	for b.Loop() {
		f.Group("app.example", h)
	}
}
