package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
)

// getTrace is a GET through the sidecar that records the interim (1xx)
// responses the client receives.
func getTrace(t *testing.T, url string) (*http.Response, string, []int, []textproto.MIMEHeader) {
	t.Helper()
	var mu sync.Mutex
	var codes []int
	var headers []textproto.MIMEHeader
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		codes, headers = append(codes, code), append(headers, h)
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	mu.Lock()
	defer mu.Unlock()
	return resp, string(b), codes, headers
}

// A 103 Early Hints from the upstream reaches the client whose request
// fetched (RFC 8297), with its own fields only; it is never stored, so the
// hit that follows has none, and the final answer does not pick up the
// hint's fields. On the old code the cached path dropped every 1xx.
func TestEarlyHintsRelayedNotStored(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</app.css>; rel=preload; as=style")
		w.Header().Set("Surrogate-Key", "hinted")
		w.WriteHeader(http.StatusEarlyHints)
		clear(w.Header())
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "page")
	})
	e := newEnv(t, up, []testRoute{clientRoute}, withTagHeaders(true))
	tests := []struct {
		name   string
		hints  int
		status string
	}{
		{"miss relays the hint", 1, "fwd=miss"},
		{"hit has none", 0, "hit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, b, codes, hdrs := getTrace(t, e.front.URL+"/clients/1")
			e.l1.Wait()
			if b != "page" || !strings.Contains(resp.Header.Get("Cache-Status"), tc.status) {
				t.Fatalf("%q %q", b, resp.Header.Get("Cache-Status"))
			}
			if len(codes) != tc.hints {
				t.Fatalf("interim responses %v, want %d", codes, tc.hints)
			}
			if tc.hints > 0 {
				if codes[0] != http.StatusEarlyHints || hdrs[0].Get("Link") != "</app.css>; rel=preload; as=style" || hdrs[0].Get("Surrogate-Key") != "" {
					t.Fatalf("interim %d %v", codes[0], hdrs[0])
				}
			}
			if l := resp.Header.Get("Link"); l != "" {
				t.Fatalf("final answer carries the hint's Link %q", l)
			}
		})
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("upstream calls = %d, want 1", n)
	}
}

// The fetch outlives a client that leaves; a 1xx that arrives afterwards
// must not be written to that client's finished ResponseWriter (the race
// detector and the next request on the connection would see it). The
// flight still stores the answer for the others.
func TestEarlyHintsAfterClientLeft(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		held(t, release)
		w.Header().Set("Link", "</a.js>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		fmt.Fprint(w, "late")
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.front.URL+"/clients/1", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	await(t, arrived)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the request was answered before the upstream")
	}
	close(release)
	for i := 0; ; i++ {
		// A waiter on the flight gets no 1xx; a request after it, a hit
		// or (before L1 shows the entry) a fetch of its own.
		resp, b, _, _ := getTrace(t, e.front.URL+"/clients/1")
		e.l1.Wait()
		if b != "late" {
			t.Fatalf("%q", b)
		}
		if strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
			break
		}
		if i == 100 {
			t.Fatalf("never stored: %q", resp.Header.Get("Cache-Status"))
		}
	}
}

// Tag headers are the upstream's word to this cache, never the client's:
// they are stripped from the 1xx answers a pass-through relays, on the lean
// loop (a body-less GET) and on ReverseProxy (a request with a body) alike.
// On the old code the ReverseProxy path relayed a 103's Surrogate-Key.
func TestEarlyHintsOnPassThroughLoseTagHeaders(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Link", "</app.css>; rel=preload; as=style")
		w.Header().Set("Surrogate-Key", "internal-key")
		w.Header().Set("Xkey", "other-key")
		w.WriteHeader(http.StatusEarlyHints)
		clear(w.Header())
		fmt.Fprint(w, "done")
	})
	e := newEnv(t, up, nil, withTagHeaders(true))
	for _, tc := range []struct {
		name, method string
		body         io.Reader
	}{
		{"lean loop (GET)", http.MethodGet, nil},
		{"ReverseProxy (POST with a body)", http.MethodPost, strings.NewReader("payload")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hints []textproto.MIMEHeader
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, h)
				return nil
			}}
			ctx := httptrace.WithClientTrace(context.Background(), trace)
			req, err := http.NewRequestWithContext(ctx, tc.method, e.front.URL+"/anything", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "done" || len(hints) != 1 {
				t.Fatalf("answer %q with %d interim responses, want \"done\" after one", b, len(hints))
			}
			if hints[0].Get("Link") == "" {
				t.Errorf("the hint lost its Link: %v", hints[0])
			}
			if k := hints[0].Get("Surrogate-Key") + hints[0].Get("Xkey"); k != "" {
				t.Errorf("the hint relayed the upstream's tag headers: %v", hints[0])
			}
		})
	}
}

// An upstream's own 100 Continue answers the sidecar's request, never the
// client's, on every path (ARCHITECTURE 5): a client that sent Expect:
// 100-continue gets net/http's one 100, as the body is read, and a client
// that did not gets none. On the old code the lean loop (a body-less
// pass-through GET) relayed each of the upstream's 100s (relay1xx), so a
// client got two 100s to a GET that asked for none (found by the
// invariant harness's origin-continue row).
func TestUpstreamContinueNotRelayed(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusContinue)
		w.WriteHeader(http.StatusContinue)
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "done")
	})
	e := newEnv(t, up, []testRoute{clientRoute})
	for _, tc := range []struct {
		name, method, path string
		body               string
		expect             bool
		want               int // 100s the client may see
	}{
		{"lean loop (pass-through GET)", http.MethodGet, "/anything", "", false, 0},
		{"cached miss", http.MethodGet, "/clients/7", "", false, 0},
		{"ReverseProxy (POST with a body)", http.MethodPost, "/anything", "payload", false, 0},
		{"ReverseProxy behind Expect", http.MethodPost, "/anything", "payload", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			continues := 0
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
				mu.Lock()
				defer mu.Unlock()
				if code == http.StatusContinue {
					continues++
				}
				return nil
			}}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), tc.method, e.front.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.expect {
				req.Header.Set("Expect", "100-continue")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != http.StatusOK || string(b) != "done" || continues != tc.want {
				t.Fatalf("%s %q after %d 100 Continue, want 200 \"done\" after %d", resp.Status, b, continues, tc.want)
			}
		})
	}
}
