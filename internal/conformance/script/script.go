// Package script plays the rows of the RFC 9111 conformance table
// (internal/conformance) against a sidecar started by the caller: a
// scriptable httptest origin, requests with the clock moved between them,
// and what each answer and the origin must show. The conformance package
// starts the sidecar in-process with a test clock; cmd/sidecache starts the
// built binary and plays the rows that need no clock (see Start). It is a
// test helper: its functions take a *testing.T.
package script

import (
	"context"
	"fmt"
	"io"
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
	// Hang: the origin never answers; the sidecar's upstream.timeout (2s)
	// ends the request.
	Hang bool
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

// Epoch is the start of the test clock: a whole second, so HTTP-dates are
// exact. {epoch±N} in headers is relative to it on either clock.
func Epoch() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// Clock is the time the origin's Date headers and the sidecar share.
type Clock interface {
	Now() time.Time
	// Advance moves the clock; false when it cannot be moved.
	Advance(d time.Duration) bool
}

// TestClock starts at Epoch and moves only when told.
type TestClock struct{ off atomic.Int64 }

// Now is the test clock's time.
func (c *TestClock) Now() time.Time { return Epoch().Add(time.Duration(c.off.Load())) }

// Advance moves the test clock forward.
func (c *TestClock) Advance(d time.Duration) bool { c.off.Add(int64(d)); return true }

// RealClock is the wall clock, for a sidecar that reads its own (a built
// binary): rows played on it must not move the clock.
type RealClock struct{}

// Now is the wall-clock time, to the whole second (HTTP-dates).
func (RealClock) Now() time.Time { return time.Now().UTC().Truncate(time.Second) }

// Advance cannot move the wall clock.
func (RealClock) Advance(d time.Duration) bool { return d == 0 }

// ClockFree reports whether every step of c keeps the clock where it is,
// so that c can be played on a RealClock.
func ClockFree(c Case) bool {
	for _, s := range c.Steps {
		if s.After != 0 {
			return false
		}
	}
	return true
}

// origin answers from a script and records what it was asked.
type scriptedOrigin struct {
	*httptest.Server
	clk  Clock
	mu   sync.Mutex
	seen []Seen
	resp []Resp
}

func newOrigin(t *testing.T, clk Clock, resp []Resp) *scriptedOrigin {
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
	if rs.Hang {
		<-r.Context().Done()
		return
	}
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
	h.Set("Date", o.clk.Now().Format(http.TimeFormat))
	for i := 0; i+1 < len(rs.Header); i += 2 {
		k, v := rs.Header[i], rs.Header[i+1]
		if k == "Date" && v == "-" {
			h["Date"] = nil // net/http then sends none
			continue
		}
		if k == "Date" {
			h.Del("Date")
		}
		h.Add(k, Expand(v, o.clk.Now()))
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

// Expand replaces {now}, {now-N}, {now+N} and {epoch±N} with HTTP-dates.
func Expand(v string, now time.Time) string {
	for _, name := range []string{"{now", "{epoch"} {
		at := now
		if name == "{epoch" {
			at = Epoch()
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

// Config is the sidecar configuration for c in front of the origin at
// originURL: port-0 listeners, route r on /r/{id} with c.Route's settings,
// then c.Routes.
func Config(originURL string, c Case) string {
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
	return fmt.Sprintf(configYAML, originURL, route.String(), more.String())
}

// Start runs a sidecar on config (see Config) whose clock is now, and
// returns its proxy's base URL ("http://host:port"); it stops the sidecar
// in a t.Cleanup.
type Start func(t *testing.T, config string, now func() time.Time) string

// Run plays one case against a fresh origin and the sidecar start runs.
func Run(t *testing.T, c Case, clk Clock, start Start) {
	o := newOrigin(t, clk, c.Origin)
	base := start(t, Config(o.URL, c), clk.Now)
	client := newClient(t)
	for i, s := range c.Steps {
		if !clk.Advance(s.After) {
			t.Fatalf("step %d moves the clock, which this sidecar does not share", i+1)
		}
		before := len(o.requests())
		hdr := make([]string, len(s.Header))
		for j, v := range s.Header {
			hdr[j] = Expand(v, clk.Now())
		}
		path := s.Path
		if path == "" {
			path = "/r/1"
		}
		code, h, body, interim := do(t, client, s.Method, base+path, hdr)
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
			if got, want := conditional(seen[len(seen)-1].Header), Expand(s.Cond, clk.Now()); got != want {
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

// newClient is one case's client: it follows no redirect and leaves
// content-codings alone, so the answers are seen as the sidecar sent them.
func newClient(t *testing.T) *http.Client {
	c := &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func do(t *testing.T, client *http.Client, method, url string, hdr []string) (int, http.Header, string, []int) {
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

// RunTable plays each case as a subtest, on a fresh TestClock per case,
// or on the wall clock when wall is set.
func RunTable(t *testing.T, cases []Case, start Start, wall bool) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var clk Clock = &TestClock{}
			if wall {
				clk = RealClock{}
			}
			Run(t, c, clk, start)
		})
	}
}
