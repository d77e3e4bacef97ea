package conformance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// Case is one row of the table.
type Case struct {
	Name string
	// Route is the YAML of the route's settings under test, one per line
	// (e.g. "freshness: origin"); its path is /r/{id}.
	Route string
	// Routes is YAML for more routes after it, as list items
	// ("- name: w\n  methods: [POST]\n  path: /w"), for rows that need them.
	Routes string
	// Origin are the origin's answers, one per request it receives, in
	// order; the last one repeats.
	Origin []Resp
	Steps  []Step
}

// Resp is one origin answer. Header values may use {now}, {now-N} and
// {now+N} (N seconds) for HTTP-dates on the test clock; a Date header is
// added from the clock unless given ("-" leaves it out).
type Resp struct {
	Status int // 0: 200
	Header []string
	Body   string // "": "body-<n>", n counting the origin's answers from 1
	// Hints are header pairs of a 103 Early Hints sent before the answer
	// (none when empty).
	Hints []string
	// Drop: the origin closes the connection without answering (an
	// unreachable origin, as the sidecar's transport sees it).
	Drop bool
}

// Step is one client request and what it must show.
type Step struct {
	// After moves the clock forward before the request.
	After time.Duration
	// Method is GET when empty, Path /r/1; Header are request header pairs.
	Method string
	Path   string
	Header []string
	// Fetch: the origin received this request (false: answered from the
	// cache alone).
	Fetch bool
	// Cond is the conditional the origin saw, as "If-None-Match: <v>" or
	// "If-Modified-Since: <v>" ("" none); checked when Fetch.
	Cond string
	// Status expected (0: 200), Body when not empty.
	Status int
	Body   string
	// Age is the Age header expected: "" not checked, "-" absent.
	Age string
	// CacheStatus, when not empty, must be a substring of Cache-Status.
	CacheStatus string
	// Headers are response header pairs that must be present as given
	// ("": absent).
	Headers []string
	// Background: the origin is asked after the response, by a background
	// refresh (stale-while-revalidate); the step waits for that request.
	Background bool
	// Check, when set, makes any further assertion on the exchange.
	Check func(t *testing.T, r Result)
}

// Result is one step's exchange as the client and the origin saw it.
type Result struct {
	Status  int
	Header  http.Header
	Body    string
	Interim []int  // statuses of the 1xx responses the client received
	Origin  []Seen // every request the origin has received so far
}

// Seen is one request the origin received.
type Seen struct {
	Method, Path string
	Header       http.Header
}

// Start of the test clock: a whole second, so HTTP-dates are exact.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return epoch.Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

// origin answers from a script and records what it was asked.
type scriptedOrigin struct {
	*httptest.Server
	clk  *clock
	mu   sync.Mutex
	seen []Seen
	resp []Resp
}

func newOrigin(t *testing.T, clk *clock, resp []Resp) *scriptedOrigin {
	o := &scriptedOrigin{clk: clk, resp: resp}
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.Close)
	return o
}

func (o *scriptedOrigin) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.seen = append(o.seen, Seen{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
	n := len(o.seen)
	rs := o.resp[min(n, len(o.resp))-1]
	o.mu.Unlock()
	if rs.Drop {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	h := w.Header()
	if len(rs.Hints) > 0 {
		for i := 0; i+1 < len(rs.Hints); i += 2 {
			h.Add(rs.Hints[i], rs.Hints[i+1])
		}
		w.WriteHeader(http.StatusEarlyHints)
		for i := 0; i < len(rs.Hints); i += 2 {
			h.Del(rs.Hints[i])
		}
	}
	h.Set("Date", o.clk.now().Format(http.TimeFormat))
	for i := 0; i+1 < len(rs.Header); i += 2 {
		k, v := rs.Header[i], rs.Header[i+1]
		if k == "Date" && v == "-" {
			h["Date"] = nil // net/http then sends none
			continue
		}
		if k == "Date" {
			h.Del("Date")
		}
		h.Add(k, expand(v, o.clk.now()))
	}
	status := rs.Status
	if status == 0 {
		status = 200
	}
	w.WriteHeader(status)
	if status == http.StatusNotModified || status == http.StatusNoContent {
		return
	}
	body := rs.Body
	if body == "" {
		body = "body-" + strconv.Itoa(n)
	}
	io.WriteString(w, body)
}

// expand replaces {now}, {now-N}, {now+N} and {epoch±N} with HTTP-dates.
func expand(v string, now time.Time) string {
	for _, name := range []string{"{now", "{epoch"} {
		at := now
		if name == "{epoch" {
			at = epoch
		}
		for {
			i := strings.Index(v, name)
			if i < 0 {
				break
			}
			j := strings.IndexByte(v[i:], '}')
			if j < 0 {
				break
			}
			off, _ := strconv.Atoi(strings.TrimPrefix(v[i+len(name):i+j], "+"))
			v = v[:i] + at.Add(time.Duration(off)*time.Second).Format(http.TimeFormat) + v[i+j+1:]
		}
	}
	return v
}

func (o *scriptedOrigin) requests() []Seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Seen(nil), o.seen...)
}

const configYAML = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
upstream:
  url: %s
  timeout: 2s
cache:
  l1:
    max_bytes: 16MiB
routes:
  - name: r
    path: /r/{id}
%s%s
`

// run plays one case against a fresh sidecar and origin.
func run(t *testing.T, c Case) {
	clk := &clock{}
	o := newOrigin(t, clk, c.Origin)
	var route strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(c.Route), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			fmt.Fprintf(&route, "    %s\n", line)
		}
	}
	var more strings.Builder
	for _, line := range strings.Split(c.Routes, "\n") {
		if strings.TrimSpace(line) != "" {
			fmt.Fprintf(&more, "  %s\n", line)
		}
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(configYAML, o.URL, route.String(), more.String())), "conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, server.Options{Logger: slog.New(slog.DiscardHandler), WatchInterval: -1, Now: clk.now})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	base := "http://" + srv.ProxyAddr()
	for i, s := range c.Steps {
		clk.advance(s.After)
		before := len(o.requests())
		hdr := make([]string, len(s.Header))
		for j, v := range s.Header {
			hdr[j] = expand(v, clk.now())
		}
		path := s.Path
		if path == "" {
			path = "/r/1"
		}
		code, h, body, interim := do(t, s.Method, base+path, hdr)
		if s.Background {
			waitFor(t, func() bool { return len(o.requests()) > before })
		}
		seen := o.requests()
		where := fmt.Sprintf("step %d (%s after %v)", i+1, methodOr(s.Method), s.After)
		fetched := len(seen) > before
		if fetched != s.Fetch {
			t.Errorf("%s: origin asked = %v, want %v (Cache-Status %q)", where, fetched, s.Fetch, h.Get("Cache-Status"))
		}
		if fetched && s.Fetch {
			if got, want := conditional(seen[len(seen)-1].Header), expand(s.Cond, clk.now()); got != want {
				t.Errorf("%s: origin saw conditional %q, want %q", where, got, want)
			}
		}
		if want := statusOr(s.Status); code != want {
			t.Errorf("%s: status %d, want %d", where, code, want)
		}
		if s.Body != "" && body != s.Body {
			t.Errorf("%s: body %q, want %q", where, body, s.Body)
		}
		switch got, ok := h["Age"]; {
		case s.Age == "":
		case s.Age == "-" && ok:
			t.Errorf("%s: Age %q, want none", where, got)
		case s.Age != "-" && (!ok || got[0] != s.Age):
			t.Errorf("%s: Age %q, want %q", where, got, s.Age)
		}
		for j := 0; j+1 < len(s.Headers); j += 2 {
			got, want := h.Values(s.Headers[j]), s.Headers[j+1]
			if want == "" && len(got) == 0 {
				continue
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("%s: %s %q, want %q", where, s.Headers[j], got, s.Headers[j+1])
			}
		}
		if s.Check != nil {
			s.Check(t, Result{Status: code, Header: h, Body: body, Interim: interim, Origin: seen})
		}
		if s.CacheStatus != "" && !strings.Contains(h.Get("Cache-Status"), s.CacheStatus) {
			t.Errorf("%s: Cache-Status %q, want it to contain %q", where, h.Get("Cache-Status"), s.CacheStatus)
		}
	}
}

// waitFor polls for a background request the origin must receive; it
// fails after 5 s (a count, not a timing: the request must come at all).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the origin was never asked")
		}
	}
}

// conditional names the conditional header of an origin request.
func conditional(h http.Header) string {
	var out []string
	for _, k := range []string{"If-None-Match", "If-Modified-Since"} {
		if v := h.Get(k); v != "" {
			out = append(out, k+": "+v)
		}
	}
	return strings.Join(out, ", ")
}

func methodOr(m string) string {
	if m == "" {
		return http.MethodGet
	}
	return m
}

func statusOr(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}

var client = &http.Client{
	Timeout:       10 * time.Second,
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func do(t *testing.T, method, url string, hdr []string) (int, http.Header, string, []int) {
	t.Helper()
	var interim []int
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		interim = append(interim, code)
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), methodOr(method), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b), interim
}

// runTable runs a section's rows as subtests.
func runTable(t *testing.T, cases []Case) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { run(t, c) })
	}
}
