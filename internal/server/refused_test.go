package server_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Each request the edge refuses (400 for ambiguous framing, 508 for a
// loop, 405 for TRACE) and each connection it cuts at write_timeout counts
// once in sidecache_edge_refused_total, under its reason, and in no other
// reason; what the edge answers or forwards counts nothing there. On the
// old code no metric counted them: a front proxy smuggling, a loop or
// stalling clients showed nowhere but in their own logs.
func TestEdgeRefusalsCounted(t *testing.T) {
	ended := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/download" {
			io.WriteString(w, "ok")
			return
		}
		download(w, ended)
	}))
	t.Cleanup(up.Close)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  write_timeout: 300ms", up.URL, ""))

	want := map[string]float64{"framing": 0, "asterisk-form": 0, "read-timeout": 0, "loop": 0, "trace": 0, "write-timeout": 0, "malformed": 0, "header-too-large": 0, "send-budget": 0, "header-budget": 0}
	check := func(after string) {
		t.Helper()
		checkRefused(t, rep, want, after)
	}
	check("start") // every reason this config can count, at zero

	for i := range 2 {
		statuses, _ := rawExchange(t, rep.proxy, "POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		if len(statuses) != 1 || !strings.HasPrefix(statuses[0], "400") {
			t.Fatalf("ambiguous framing: %q, want a 400", statuses)
		}
		want["framing"]++
		check("ambiguous framing " + strconv.Itoa(i+1))

		if code, _, _ := rep.do(t, "GET", "/other", "Via", "1.1 sidecache"); code != http.StatusLoopDetected {
			t.Fatalf("loop: %d, want 508", code)
		}
		want["loop"]++
		check("loop " + strconv.Itoa(i+1))

		if code, _, _ := rep.do(t, "TRACE", "/other"); code != http.StatusMethodNotAllowed {
			t.Fatalf("TRACE: %d, want 405", code)
		}
		want["trace"]++
		check("TRACE " + strconv.Itoa(i+1))
	}

	// Answered or forwarded, not refused: nothing counts.
	rep.do(t, "OPTIONS", "/other", "Max-Forwards", "0")
	rep.do(t, "GET", "/other", "Via", "1.1 front")
	rawExchange(t, rep.proxy, "POST /other HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n")
	check("requests the edge let through")

	// A client that stops reading a long download is cut once.
	c, err := net.Dial("tcp", strings.TrimPrefix(rep.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(c, "GET /download HTTP/1.1\r\nHost: a\r\n\r\n")
	select {
	case got := <-ended:
		// The count precedes the close that cancelled the upstream request.
		if got != "cancelled" {
			t.Fatalf("upstream %s", got)
		}
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("the upstream request is still held")
	}
	want["write-timeout"]++
	check("a stalled download")
}

// A reason the config rules out is not created at zero (docs/metrics.md,
// Series): TRACE allowed, no Via pseudonym, no write timeout.
func TestEdgeRefusalReasonsFollowConfig(t *testing.T) {
	up := newSeen(t)
	rep := startReplicaYAML(t, fmt.Sprintf(edgeConfig, "  allow_trace: true\n  via: \"\"\n  write_timeout: 0s", up.URL, ""))
	if got := edgeRefused(t, rep); fmt.Sprint(got) != "map[asterisk-form:0 framing:0 header-budget:0 header-too-large:0 malformed:0 read-timeout:0 send-budget:0]" {
		t.Errorf("reasons at start %v, want asterisk-form, framing, header-budget, header-too-large, malformed, read-timeout and send-budget alone", got)
	}
}

// edgeRefused reads sidecache_edge_refused_total by reason from rep's
// /metrics.
// checkRefused fails t unless rep's sidecache_edge_refused_total has a
// series for exactly the reasons in want, each at its count.
func checkRefused(t *testing.T, rep *replica, want map[string]float64, after string) {
	t.Helper()
	got := edgeRefused(t, rep)
	for reason, n := range want {
		if v, ok := got[reason]; !ok || v != n {
			t.Errorf("after %s: reason %q counted %v (series present %v), want %v", after, reason, v, ok, n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("after %s: reasons %v, want only %v", after, got, want)
	}
}

func edgeRefused(t *testing.T, rep *replica) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, s := range scrapeSeries(t, rep.admin+"/metrics") {
		rest, ok := strings.CutPrefix(s, `sidecache_edge_refused_total{reason="`)
		if !ok {
			continue
		}
		reason, value, _ := strings.Cut(rest, `"} `)
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		got[reason] = v
	}
	return got
}
