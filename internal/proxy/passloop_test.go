package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"testing"
	"time"
)

// The pass-through path's own allocations per request, the upstream's
// included (it runs in this process): the lean loop writes the request
// and reads the answer on the handler's goroutine without ReverseProxy's
// request clone and the transport's per-request channels. 87 before it;
// 34 before the copy buffer's pointer and the answer's watch were kept
// rather than allocated per request (net/http's request and response
// parsing, on both sides, is most of the 32 left). 34 since the sidecar
// writes X-Real-Ip (internal/clientaddr): the in-process upstream parses
// one field line more (its name and value), the sidecar allocates nothing
// for it.
func TestPassThroughAllocs(t *testing.T) {
	body := make([]byte, 512)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	e := newEnv(t, up, []testRoute{clientRoute})
	req := httptest.NewRequest("GET", e.front.URL+"/other", nil)
	w := &discard{h: make(http.Header, 8)}
	e.h.ServeHTTP(w, req) // dial once
	allocs := testing.AllocsPerRun(200, func() {
		clear(w.h)
		e.h.ServeHTTP(w, req)
	})
	if want := 34.0 + raceAllocs; allocs > want {
		t.Errorf("pass-through: %.0f allocations per request, want at most %.0f", allocs, want)
	}
}

// What a plain reverse proxy does on pass-through, the lean loop does too
// end to end (internal/lean's tests hold the connection-level cases: surplus
// bytes, closed idle connections, the retry, each request-writing rule):
// trailers relayed (RFC 9110 §6.5), 1xx relayed (RFC 9110 §15.2), a body of
// unknown length streamed as it comes, hop-by-hop fields dropped and
// X-Forwarded-* set from the connection (RFC 9110 §7.6.1).
func TestPassThroughKeepsProtocol(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "body")
			w.Header().Set("X-Sum", "42")
		case "/hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			io.WriteString(w, "final")
		case "/stream":
			io.WriteString(w, "first;")
			http.NewResponseController(w).Flush()
			held(t, release) // the client has read the first part
			io.WriteString(w, "second")
		case "/headers":
			for _, h := range []string{"X-Secret", "Keep-Alive", "Upgrade", "Proxy-Authorization"} {
				if v := r.Header.Get(h); v != "" {
					t.Errorf("hop-by-hop %s forwarded: %q", h, v)
				}
			}
			if r.Header.Get("Te") != "trailers" || r.Header.Get("X-Kept") != "k" {
				t.Errorf("Te %q, X-Kept %q; want trailers, k", r.Header.Get("Te"), r.Header.Get("X-Kept"))
			}
			if xff := r.Header.Get("X-Forwarded-For"); xff != "127.0.0.1" {
				t.Errorf("X-Forwarded-For %q, want the client's address only", xff)
			}
			if _, ok := r.Header["User-Agent"]; ok {
				t.Errorf("User-Agent %q added", r.Header.Get("User-Agent"))
			}
			io.WriteString(w, r.Method+" "+r.URL.RequestURI())
		}
	})
	e := newEnv(t, up, []testRoute{clientRoute})

	t.Run("trailers", func(t *testing.T) {
		resp, err := client.Get(e.front.URL + "/trailer")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "body" || resp.Trailer.Get("X-Sum") != "42" {
			t.Errorf("body %q trailer %v, want body and X-Sum: 42", b, resp.Trailer)
		}
	})
	t.Run("1xx", func(t *testing.T) {
		var got []int
		var link string
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				got, link = append(got, code), h.Get("Link")
				return nil
			},
		})
		req, _ := http.NewRequestWithContext(ctx, "GET", e.front.URL+"/hints", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if len(got) != 1 || got[0] != 103 || link == "" || string(b) != "final" || resp.Header.Get("Link") != "" {
			t.Errorf("1xx %v (Link %q), final %q with Link %q; want one 103 with Link, then final without",
				got, link, b, resp.Header.Get("Link"))
		}
	})
	t.Run("stream", func(t *testing.T) {
		resp, err := client.Get(e.front.URL + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make([]byte, len("first;"))
		if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first;" {
			t.Fatalf("first part %q, %v: not streamed before the upstream finished", first, err)
		}
		close(release)
		rest, _ := io.ReadAll(resp.Body)
		if string(rest) != "second" {
			t.Errorf("rest %q", rest)
		}
	})
	t.Run("headers", func(t *testing.T) {
		hdr := http.Header{
			"Connection": {"X-Secret"}, "X-Secret": {"s"}, "Keep-Alive": {"timeout=5"},
			"Te": {"trailers, deflate"}, "X-Kept": {"k"}, "X-Forwarded-For": {"6.6.6.6"},
			"Proxy-Authorization": {"Basic eA=="}, "User-Agent": {""},
		}
		resp, b := e.do("GET", "/headers?q=1", hdr)
		if resp.StatusCode != 200 || b != "GET /headers?q=1" {
			t.Errorf("status %d body %q", resp.StatusCode, b)
		}
	})
}

// A client that leaves while the upstream has not answered ends the
// upstream request (its connection is closed), as ReverseProxy does.
func TestPassThroughClientLeaves(t *testing.T) {
	started, ended := make(chan struct{}), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(ended)
		case <-time.After(10 * time.Second):
		}
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.front.URL+"/other", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	await(t, started)
	cancel()
	await(t, errc)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request went on after the client left")
	}
}
