package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/uptransport"
)

// stallGuard is how long a test client waits for a stalled answer to end
// before it calls it held: far longer than the upstream.timeout the tests
// set (stallTimeout), and well under the package's own timeout.
const (
	stallTimeout = 500 * time.Millisecond
	stallGuard   = 30 * time.Second
)

func withStallTimeout(o *proxy.Options, _ *l1.Store) {
	o.Timeout = stallTimeout
	if o.Transport != nil {
		o.Transport = uptransport.New(o.Timeout, 0, 0)
	}
}

// bodyPaths are the four ways an upstream body reaches a client: passed
// through (lean or ReverseProxy), or over max_body_bytes on a cached route
// (a lean or a Transport fill).
var bodyPaths = []struct {
	name string
	path string
	opts []envOpt
}{
	{"lean pass-through", "/p/1", nil},
	{"ReverseProxy pass-through", "/p/1", []envOpt{withTransport}},
	{"large body, lean fill", "/c/1", nil},
	{"large body, Transport fill", "/c/1", []envOpt{withTransport}},
}

// An upstream that sends its header and half its body, then nothing more
// while the connection stays open, must not hold the client's connection
// (nor the upstream's, nor the handler) for good: every path cuts the body
// once no byte came for upstream.timeout (NGINX's proxy_read_timeout,
// Varnish's between_bytes_timeout), closes the client's connection (its
// answer has started: no status can tell it), and stores nothing. Probe h3
// #2: with upstream.timeout 3s the connection sat 20 s without a byte
// until the client gave up, on a pass-through and on a cached route whose
// answer was over max_body_bytes.
func TestStalledBodyIsCut(t *testing.T) {
	const total = 3 << 20 // over the env's max_body_bytes (1 MiB): large on a cached route
	cases := bodyPaths
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			released := make(chan struct{}, 4)
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(total))
				w.Header().Set("Cache-Control", "max-age=60")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(bytes.Repeat([]byte("x"), total/2))
				_ = http.NewResponseController(w).Flush()
				go func() {
					<-r.Context().Done() // the sidecar closed the upstream connection
					released <- struct{}{}
				}()
				<-t.Context().Done() // stalled until the test ends
			})
			rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}
			e := newEnv(t, up, []testRoute{rt}, append(tc.opts, withStallTimeout)...)

			ctx, cancel := context.WithTimeout(context.Background(), stallGuard)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+tc.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if ctx.Err() != nil {
				t.Fatalf("the client's read was still open after %v (%d bytes read): the stalled body was never cut", stallGuard, n)
			}
			if err == nil || n >= total {
				t.Fatalf("read %d of %d bytes, err %v: a cut body must reach the client broken, not whole", n, total, err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the read ended by the test's guard: %v", err)
			}
			select {
			case <-released:
			case <-ctx.Done():
				t.Fatalf("the upstream's connection was still open after %v", stallGuard)
			}
			if tc.path == "/c/1" {
				// Nothing of the cut answer is stored: the next request
				// goes upstream again (and is cut again).
				before := up.calls.Load()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+tc.path, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if ctx.Err() != nil {
					t.Fatalf("the second read was still open after %v", stallGuard)
				}
				if got := up.calls.Load() - before; got != 1 {
					t.Fatalf("the second request made %d upstream calls, want 1 (nothing stored)", got)
				}
			}
		})
	}
}

// The bound is on the wait between two reads, not on the stream: a body
// whose bytes keep coming, for longer in all than upstream.timeout, reaches
// the client whole on every path (README: an answer over max_body_bytes
// streams through whole, however long it takes).
func TestFlowingBodyIsNotCut(t *testing.T) {
	const (
		chunks  = 30
		chunk   = 64 << 10 // each over maxBody: the first makes the answer large, streamed at once
		maxBody = 16 << 10
		every   = 100 * time.Millisecond
		timeout = 2 * time.Second // well over every: a loaded machine's delay between chunks stays under it
	)
	cases := bodyPaths
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(chunks*chunk))
				w.Header().Set("Cache-Control", "max-age=60")
				for range chunks {
					if _, err := w.Write(bytes.Repeat([]byte("x"), chunk)); err != nil {
						return
					}
					_ = http.NewResponseController(w).Flush()
					time.Sleep(every)
				}
			})
			rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}
			withTimeout := func(o *proxy.Options, _ *l1.Store) {
				o.Timeout = timeout
				// Until a cached route's answer is over max_body_bytes the
				// fill reads it within the whole call's upstream.timeout
				// (docs/configuration.md); only the stream after that is
				// bounded by the wait between reads, which is what this
				// test is about. With the env's 1 MiB, 16 chunks (1.6 s of
				// sleeps) had to come within the call's 2 s, and on a
				// loaded machine did not (504). The first chunk is over
				// maxBody: the stream starts at once.
				o.MaxBodyBytes = maxBody
				if o.Transport != nil {
					o.Transport = uptransport.New(o.Timeout, 0, 0)
				}
			}
			e := newEnv(t, up, []testRoute{rt}, append(tc.opts, withTimeout)...)
			resp, body := e.get(tc.path)
			if resp.StatusCode != http.StatusOK || len(body) != chunks*chunk {
				t.Fatalf("status %d, %d of %d bytes: a body that keeps coming must not be cut", resp.StatusCode, len(body), chunks*chunk)
			}
		})
	}
}

// An answer announced larger than max_body_bytes (its Content-Length)
// cannot be kept, so it streams from its first bytes: the sidecar does not
// first read max_body_bytes of it under the whole call's deadline. Before,
// an upstream that sent 64 KiB and then paused answered the client 504 at
// upstream.timeout, though its body was flowing (the flake hunter's
// TestStalledBodyIsCut, on a loaded machine, was the slow case of this).
func TestAnnouncedLargeStreamsAtOnce(t *testing.T) {
	const total, first = 3 << 20, 64 << 10
	for _, tc := range bodyPaths[2:] { // the cached route's two fills
		t.Run(tc.name, func(t *testing.T) {
			hold := make(chan struct{})
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(total))
				w.Header().Set("Cache-Control", "max-age=60")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(bytes.Repeat([]byte("x"), first))
				_ = http.NewResponseController(w).Flush()
				select { // paused until the client has read what came
				case <-hold:
				case <-r.Context().Done():
				}
			})
			rt := testRoute{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}
			e := newEnv(t, up, []testRoute{rt}, append(tc.opts, func(o *proxy.Options, _ *l1.Store) {
				o.Timeout = 20 * time.Second // the test's guard ends first
				if o.Transport != nil {
					o.Transport = uptransport.New(o.Timeout, 0, 0)
				}
			})...)
			defer close(hold)
			ctx, cancel := context.WithTimeout(context.Background(), stallGuard)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+tc.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("no answer while the upstream paused after %d bytes: %v", first, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Length") != strconv.Itoa(total) {
				t.Fatalf("status %d, Content-Length %q, want 200 and %d: the announced-large answer was not streamed", resp.StatusCode, resp.Header.Get("Content-Length"), total)
			}
			if n, err := io.ReadFull(resp.Body, make([]byte, first)); err != nil {
				t.Fatalf("read %d of the %d bytes the upstream sent before pausing: %v", n, first, err)
			}
			if cs := resp.Header.Get("Cache-Status"); !strings.Contains(cs, "too-large") {
				t.Errorf("Cache-Status %q, want detail=too-large", cs)
			}
		})
	}
}
