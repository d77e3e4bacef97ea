package lean_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/lean"
)

// scriptedUpstream is an upstream on a plain socket: each request's bytes, as
// they came, are recorded, and answer writes the reply for the n-th
// request (from 0) on the connection, or closes it when it returns "".
type scriptedUpstream struct {
	ln    net.Listener
	mu    sync.Mutex
	got   []string
	conns atomic.Int64
}

func newScriptedUpstream(t *testing.T, answer func(n int, req string) string) *scriptedUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &scriptedUpstream{ln: ln}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					var req strings.Builder
					for {
						line, err := br.ReadString('\n')
						req.WriteString(line)
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
					}
					u.mu.Lock()
					u.got = append(u.got, req.String())
					u.mu.Unlock()
					a := answer(int(n.Add(1)-1), req.String())
					if a == "" {
						return
					}
					if _, err := io.WriteString(c, a); err != nil {
						return
					}
				}
			}()
		}
	}()
	return u
}

func (u *scriptedUpstream) url() *url.URL {
	return &url.URL{Scheme: "http", Host: u.ln.Addr().String()}
}

func (u *scriptedUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// outRequest is a request as the proxy builds one for the cached path
// (outgoing: SetURL, SetXForwarded), with header h.
func outRequest(ctx context.Context, up *url.URL, path string, h http.Header) *http.Request {
	u := *up
	u.Path, u.RawQuery, _ = strings.Cut(path, "?")
	return (&http.Request{Method: http.MethodGet, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h}).WithContext(ctx)
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Send writes a request byte for byte as http.Transport writes it: the
// upstream of a cached fill or bulk call cannot tell the two apart (the
// same fields in the same order, the same User-Agent, the Transport's own
// Accept-Encoding: gzip when the request names no coding).
func TestSendWritesAsTransport(t *testing.T) {
	up := newScriptedUpstream(t, func(int, string) string { return okAnswer })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cl := lean.New(up.url(), 5*time.Second, 0, 0)
	for _, tc := range []struct {
		name, path string
		h          http.Header
	}{
		{"no header", "/users?ids=1,2", http.Header{}},
		{"empty User-Agent", "/users?ids=1", http.Header{"User-Agent": {""}, "Accept": {"application/json"}}},
		{"User-Agent", "/a/b", http.Header{"User-Agent": {"  curl/8 "}, "X-Request-Id": {"abc"}}},
		{"Accept-Encoding named", "/x", http.Header{"Accept-Encoding": {"gzip, br"}, "User-Agent": {""}}},
		{"Accept-Encoding empty", "/x", http.Header{"Accept-Encoding": {""}, "User-Agent": {""}}},
		{"Range", "/x", http.Header{"Range": {"bytes=0-1"}, "User-Agent": {""}}},
		{"many fields", "/users?ids=a%2Cb&x=1", http.Header{
			"X-Forwarded-For": {"10.0.0.1"}, "X-Forwarded-Host": {"api.example"}, "X-Forwarded-Proto": {"http"},
			"Via": {"1.1 sidecache"}, "Accept-Language": {"de", "fr"}, "Cookie": {"a=1"}, "Zz": {"last"},
			"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "If-None-Match": {`"e1"`},
			"Accept": {"application/json"}, "User-Agent": {""}, "lower-case": {"kept as is"}, "Empty": {}, "Tab": {"a\tb "},
		}},
		{"escaped path", "/a%2Fb/c", http.Header{"User-Agent": {""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send := func(viaLean bool) string {
				before := len(up.requests())
				out := outRequest(t.Context(), up.url(), tc.path, tc.h.Clone())
				if u, err := url.Parse(tc.path); err == nil {
					out.URL.Path, out.URL.RawPath, out.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
				}
				var resp *http.Response
				var err error
				if viaLean {
					if !cl.TakesOut(out) {
						t.Fatal("TakesOut false")
					}
					resp, err = cl.Send(out, nil)
				} else {
					resp, err = tr.RoundTrip(out)
				}
				if err != nil {
					t.Fatal(err)
				}
				if b := readBody(t, resp); b != "ok" {
					t.Fatalf("body %q", b)
				}
				got := up.requests()
				if len(got) != before+1 {
					t.Fatalf("%d requests, want %d", len(got), before+1)
				}
				return got[before]
			}
			want, got := send(false), send(true)
			if got != want {
				t.Errorf("lean wrote\n%q\nthe Transport\n%q", got, want)
			}
		})
	}
}

// What Send refuses to send, the Transport refuses too, with its words.
func TestSendRefusesAsTransport(t *testing.T) {
	up := newScriptedUpstream(t, func(int, string) string { return okAnswer })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cl := lean.New(up.url(), 5*time.Second, 0, 0)
	for _, h := range []http.Header{
		{"X-A": {"a\r\nX-Injected: 1"}},
		{"X A": {"1"}},
		{"X-A": {"nul\x00"}},
	} {
		_, terr := tr.RoundTrip(outRequest(t.Context(), up.url(), "/", h))
		_, lerr := cl.Send(outRequest(t.Context(), up.url(), "/", h), nil)
		if terr == nil || lerr == nil || !strings.HasSuffix(lerr.Error(), terr.Error()) {
			t.Errorf("%v: lean %v, Transport %v", h, lerr, terr)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
}

// TakesOut leaves to the Transport what Send does not do as it does.
func TestTakesOut(t *testing.T) {
	up := &url.URL{Scheme: "http", Host: "up:8080"}
	cl := lean.New(up, time.Second, 0, 0)
	for _, tc := range []struct {
		name string
		edit func(r *http.Request) *http.Request
		want bool
	}{
		{"GET", func(r *http.Request) *http.Request { return r }, true},
		{"HEAD", func(r *http.Request) *http.Request { r.Method = http.MethodHead; return r }, false},
		{"another host", func(r *http.Request) *http.Request { r.URL.Host = "other:8080"; return r }, false},
		{"a Host of its own", func(r *http.Request) *http.Request { r.Host = "api.example"; return r }, false},
		{"https", func(r *http.Request) *http.Request { r.URL.Scheme = "https"; return r }, false},
		{"Close", func(r *http.Request) *http.Request { r.Close = true; return r }, false},
		{"Expect", func(r *http.Request) *http.Request { r.Header.Set("Expect", "100-continue"); return r }, false},
		{"Upgrade", func(r *http.Request) *http.Request { r.Header.Set("Upgrade", "h2c"); return r }, false},
		{"a body", func(r *http.Request) *http.Request { r.Body = io.NopCloser(strings.NewReader("b")); return r }, false},
		{"a client trace", func(r *http.Request) *http.Request {
			return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{}))
		}, false},
	} {
		r := tc.edit(outRequest(context.Background(), up, "/x", http.Header{}))
		if got := cl.TakesOut(r); got != tc.want {
			t.Errorf("%s: TakesOut %v, want %v", tc.name, got, tc.want)
		}
	}
	var nilClient *lean.Client
	if nilClient.TakesOut(outRequest(context.Background(), up, "/x", http.Header{})) {
		t.Error("a nil client took a request")
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A gzip answer to the Accept-Encoding Send added is decoded, as the
// Transport decodes it, chunked or not; one to a request that named its
// coding is left as it came. The connection is reused after either.
func TestSendGzip(t *testing.T) {
	const doc = `[{"id":"1","name":"one"},{"id":"2","name":"two"}]`
	z := gzipped(t, doc)
	chunked := "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\nVary: Accept-Encoding\r\n\r\n" +
		strconv.FormatInt(int64(len(z)), 16) + "\r\n" + string(z) + "\r\n0\r\n\r\n"
	sized := "HTTP/1.1 200 OK\r\nContent-Encoding: GZIP\r\nContent-Length: " + strconv.Itoa(len(z)) + "\r\n\r\n" + string(z)
	for _, tc := range []struct{ name, answer string }{{"chunked", chunked}, {"sized", sized}} {
		t.Run(tc.name, func(t *testing.T) {
			up := newScriptedUpstream(t, func(int, string) string { return tc.answer })
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			cl := lean.New(up.url(), 5*time.Second, 0, 0)
			for i := range 2 {
				resp, err := cl.Send(outRequest(t.Context(), up.url(), "/users", http.Header{"User-Agent": {""}}), nil)
				if err != nil {
					t.Fatal(err)
				}
				tresp, err := tr.RoundTrip(outRequest(t.Context(), up.url(), "/users", http.Header{"User-Agent": {""}}))
				if err != nil {
					t.Fatal(err)
				}
				if b, tb := readBody(t, resp), readBody(t, tresp); b != doc || tb != doc {
					t.Fatalf("round %d: lean %q, Transport %q", i, b, tb)
				}
				if resp.ContentLength != tresp.ContentLength || resp.Uncompressed != tresp.Uncompressed ||
					!equalHeader(resp.Header, tresp.Header) {
					t.Errorf("lean answer %d %v %v, Transport's %d %v %v", resp.ContentLength, resp.Uncompressed, resp.Header,
						tresp.ContentLength, tresp.Uncompressed, tresp.Header)
				}
			}
			// Two connections: one for each client, each reused.
			if n := up.conns.Load(); n != 2 {
				t.Errorf("%d connections, want 2", n)
			}
			resp, err := cl.Send(outRequest(t.Context(), up.url(), "/users", http.Header{"Accept-Encoding": {"gzip"}}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if b := readBody(t, resp); b != string(z) || !strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
				t.Errorf("asked in gzip: got %q (%v), want the gzip bytes", b, resp.Header)
			}
		})
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		if strings.Join(vs, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

// A connection is reused only after a body read to its end: one closed
// early (over a caller's bound), or with bytes past its answer, is closed,
// and the next request gets the next answer of its own, not the rest.
func TestSendReuse(t *testing.T) {
	const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"
	for _, tc := range []struct {
		name   string
		first  string
		read   int // bytes of the first body read before Close; -1: all
		reused bool
	}{
		{"whole body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", -1, true},
		{"whole chunked body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n0\r\n\r\n", -1, true},
		{"no body", "HTTP/1.1 204 No Content\r\n\r\n", -1, true},
		{"body cut short by the caller", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", 2, false},
		{"chunked body cut short", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n0\r\n\r\n", 2, false},
		{"bytes past the answer", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst" + smuggled, -1, false},
		{"answer asks to close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nfirst", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newScriptedUpstream(t, func(n int, _ string) string {
				if n == 0 {
					return tc.first
				}
				return "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"
			})
			cl := lean.New(up.url(), 5*time.Second, 0, 0)
			resp, err := cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.read < 0 {
				_, _ = io.ReadAll(resp.Body)
			} else {
				_, _ = io.ReadFull(resp.Body, make([]byte, tc.read))
			}
			resp.Body.Close()
			resp, err = cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if b := readBody(t, resp); b != "second" {
				t.Errorf("second answer %q, want %q", b, "second")
			}
			if got, want := up.conns.Load(), map[bool]int64{true: 1, false: 2}[tc.reused]; got != want {
				t.Errorf("%d connections, want %d", got, want)
			}
		})
	}
}

// An upstream that closes a kept-alive connection, or reads the next
// request on it and closes it unanswered, costs the caller nothing: the
// request is sent once more on a new connection, and no more than once.
func TestSendReusedConnClosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(n int) bool // close instead of answering request n
		err   bool
	}{
		// Requests 0 and 1 open two connections; 2 goes on the last one
		// put back, its resend on the other.
		{"closed unanswered once", func(n int) bool { return n == 2 }, false},
		{"closed unanswered on both connections", func(n int) bool { return n >= 2 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newScriptedUpstream(t, func(n int, _ string) string {
				if tc.close(n) {
					return ""
				}
				return okAnswer
			})
			cl := lean.New(up.url(), 5*time.Second, 0, 0)
			// Two idle connections, so the resend may find a reused one
			// too: it is still the last.
			r1, err := cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, r1)
			readBody(t, r2)
			resp, err := cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
			if tc.err != (err != nil) {
				t.Fatalf("err %v, want error: %v", err, tc.err)
			}
			if err == nil {
				if b := readBody(t, resp); b != "ok" {
					t.Errorf("body %q", b)
				}
			}
			if n := len(up.requests()); n != 4 {
				t.Errorf("upstream read %d requests, want 4: the third sent twice, no more", n)
			}
			if n := up.conns.Load(); n != 2 {
				t.Errorf("%d connections, want 2", n)
			}
		})
	}
}

// 1xx answers are handed to on1xx, or read past without it; a 101 to a
// request that did not ask to upgrade is the final answer, as the
// Transport hands it back, and its connection is not reused.
func TestSend1xx(t *testing.T) {
	up := newScriptedUpstream(t, func(n int, _ string) string {
		switch n {
		case 0:
			return "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n" + okAnswer
		case 1:
			return "HTTP/1.1 103 Early Hints\r\n\r\n" + okAnswer
		default:
			return "HTTP/1.1 101 Switching Protocols\r\n\r\n"
		}
	})
	cl := lean.New(up.url(), 5*time.Second, 0, 0)
	var codes []int
	resp, err := cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), func(code int, h textproto.MIMEHeader) error {
		codes = append(codes, code)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if len(codes) != 2 || codes[0] != 103 || codes[1] != 100 {
		t.Errorf("on1xx got %v, want [103 100]", codes)
	}
	resp, err = cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("without on1xx: %v %v", resp, err)
	}
	readBody(t, resp)
	resp, err = cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("101: %v %v", resp, err)
	}
	readBody(t, resp)
	if n := up.conns.Load(); n != 1 {
		t.Errorf("%d connections before the 101, want 1", n)
	}
	resp, err = cl.Send(outRequest(t.Context(), up.url(), "/", http.Header{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if n := up.conns.Load(); n != 2 {
		t.Errorf("%d connections after the 101, want 2: it was not reused", n)
	}
}

// A body closed before its end closes its connection even when nothing of
// the rest has arrived yet, so neither the buffer nor the peek on reuse
// could tell: the rest, sent later, would be read as the next answer.
func TestSendBodyNotReadToItsEndNotPooled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
		<-release // the rest never comes while the test runs
	}()
	u := &url.URL{Scheme: "http", Host: ln.Addr().String()}
	cl := lean.New(u, 5*time.Second, 0, 0)
	resp, err := cl.Send(outRequest(t.Context(), u, "/", http.Header{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := lean.Idle(cl); n != 0 {
		t.Errorf("%d idle connections after a body closed before its end, want 0", n)
	}
}
