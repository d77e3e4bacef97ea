package proxy_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/redistest"
)

// Regression tests for issue 20 items 2, 7, 8, 10 and 13: what reaches the
// upstream on the cached path is what the key holds, and nothing else a
// client sends shapes an answer stored for everyone.

// from is a client whose connections leave from the loopback address ip,
// so the sidecar sees another caller address (X-Forwarded-For).
func from(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func getWith(t *testing.T, c *http.Client, url string, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Item 2: an answer that varies on a header the sidecar writes (here the
// caller's address in X-Forwarded-For) is never another caller's.
func TestVaryOnSidecarHeaderIsNotShared(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("forward_all=%v", all), func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Vary", "X-Forwarded-For")
				fmt.Fprint(w, "ip="+r.Header.Get("X-Forwarded-For"))
			})
			e := newEnv(t, up, []testRoute{{Name: "geo", Pattern: "/geo/{id}", TTL: time.Minute, ForwardAll: all}})
			for _, ip := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.2"} {
				resp, b := getWith(t, from(t, ip), e.front.URL+"/geo/1", nil)
				e.l1.Wait()
				if b != "ip="+ip {
					t.Fatalf("caller %s got %q (%s)", ip, b, resp.Header.Get("Cache-Status"))
				}
			}
			if n := up.calls.Load(); n != 4 {
				t.Errorf("%d upstream calls for 4 requests, want 4 (never stored)", n)
			}
		})
	}
}

// Item 7a: a query parameter outside key.query never reaches the upstream
// on the cached path, so it cannot shape the stored answer.
func TestUnkeyedQueryNotForwarded(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RawQuery)
		mu.Unlock()
		fmt.Fprintf(w, "<p>%s</p>", r.URL.Query().Get("callback"))
	})
	rt := testRoute{Name: "p", Pattern: "/products/{id}", TTL: time.Minute}
	rt.Key = cachekey.Options{Query: []string{"fields"}}
	e := newEnv(t, up, []testRoute{rt})
	e.get("/products/1?fields=name&callback=alert(1)//")
	_, b := e.get("/products/1?fields=name")
	if b != "<p></p>" {
		t.Errorf("a client without callback got %q", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "fields=name" {
		t.Errorf("upstream saw queries %q, want one call with fields=name", seen)
	}
}

// Item 7b: on the cached path the upstream sees the sidecar's request id,
// never the client's; the access log record holds the one sent.
func TestClientRequestIDNotForwarded(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("X-Request-Id"))
		mu.Unlock()
		fmt.Fprint(w, "id="+r.Header.Get("X-Request-Id"))
	})
	e := newEnv(t, up, []testRoute{{Name: "c", Pattern: "/c/{id}", TTL: time.Minute, ForwardAll: true}})
	front, rec := recordedFront(t, e)
	_, b := getWith(t, client, front.URL+"/c/1", http.Header{"X-Request-Id": {"<script>alert(1)</script>"}})
	if strings.Contains(b, "script") {
		t.Fatalf("the client's request id reached the upstream: %q", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 1 || ids[0] == "" || (*rec).UpstreamRequestID != ids[0] {
		t.Errorf("upstream saw ids %q; access record holds %q, want the one sent", ids, (*rec).UpstreamRequestID)
	}
}

// Item 8: an empty first Cookie or Authorization line does not hide the
// credential on the next one (forward_headers: all forwards both lines).
func TestEmptyFirstCredentialLineBypasses(t *testing.T) {
	for _, name := range []string{"Cookie", "Authorization"} {
		t.Run(name, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "who="+strings.Join(r.Header.Values(name), "|"))
			})
			e := newEnv(t, up, []testRoute{{Name: "c", Pattern: "/c/{id}", TTL: time.Minute, ForwardAll: true}})
			resp, b := e.do("GET", "/c/1", http.Header{name: {"", "alice-secret"}})
			if !strings.Contains(b, "alice") || !strings.Contains(resp.Header.Get("Cache-Status"), "bypass") {
				t.Fatalf("credentialed request: %q %q, want a bypass", b, resp.Header.Get("Cache-Status"))
			}
			if _, b := e.get("/c/1"); strings.Contains(b, "alice") {
				t.Errorf("an anonymous client got the credentialed answer %q", b)
			}
		})
	}
}

// Item 10: query spellings the upstream tells apart never share a key
// (RFC 3986 §6.2.2 neither reorders values nor decodes reserved bytes).
func TestQuerySpellingsUpstreamTellsApart(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "q="+r.URL.RawQuery)
	})
	e := newEnv(t, up, []testRoute{{Name: "s", Pattern: "/s", TTL: time.Minute}})
	for _, pair := range [][2]string{
		{"lang=fr&lang=en", "lang=en&lang=fr"},
		{"q=%zz", "q=%25zz"},
		{"a=1;b=2", "a=1%3Bb=2"},
	} {
		for _, q := range pair {
			if _, b := e.get("/s?" + q); b != "q="+q {
				t.Errorf("?%s got %q", q, b)
			}
		}
	}
	// Still one key: parameters reordered by name, unreserved escapes.
	calls := up.calls.Load()
	if _, b := e.get("/s?b=1&%61=2"); b != "q=b=1&%61=2" {
		t.Fatalf("got %q", b)
	}
	if _, b := e.get("/s?a=2&b=1"); b != "q=b=1&%61=2" || up.calls.Load() != calls+1 {
		t.Errorf("an equivalent spelling missed: %q, %d calls", b, up.calls.Load()-calls)
	}
}

// Item 13: max_key_bytes bounds variant keys: a 60 KB Accept-Language on a
// Vary'd answer passes through and leaves no key over the bound in Redis.
func TestHugeVariantKeyNotStored(t *testing.T) {
	srv := redistest.Start(t)
	st, err := l2.New(context.Background(), l2.Options{Addrs: []string{srv.Addr()}, Prefix: "vk:", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Language")
		fmt.Fprintf(w, "lang bytes=%d", len(r.Header.Get("Accept-Language")))
	})
	const maxKey = 4 << 10
	rt := testRoute{Name: "v", Pattern: "/v/{id}", TTL: time.Minute, ForwardAll: true}
	e := newEnv(t, up, []testRoute{rt}, func(o *proxyOptions, s *l1.Store) {
		o.MaxKeyBytes = maxKey
		o.Cache = cache.NewTiered(s, st, cache.TieredOptions{})
	})
	huge := strings.Repeat("en-US,", 10<<10)
	e.do("GET", "/v/1", http.Header{"Accept-Language": {"en"}}) // the variants marker exists
	for _, path := range []string{"/v/1", "/v/2"} {
		for range 2 {
			resp, b := e.do("GET", path, http.Header{"Accept-Language": {huge}})
			if b != fmt.Sprintf("lang bytes=%d", len(huge)) {
				t.Fatalf("%s: got %q", path, b)
			}
			if cs := resp.Header.Get("Cache-Status"); strings.Contains(cs, "hit") || strings.Contains(cs, "stored") {
				t.Errorf("%s: Cache-Status %q, want neither stored nor a hit", path, cs)
			}
		}
	}
	if err := st.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("nothing in Redis: the normal variant was not stored")
	}
	for _, k := range keys {
		if len(k) > maxKey+len("vk:e:") {
			t.Errorf("a %d-byte key in Redis (max_key_bytes %d)", len(k), maxKey)
		}
	}
}

// frameworkOrigin answers like Express with compression(): Vary:
// Accept-Encoding on every answer, gzip only above a 1 KB threshold.
func frameworkOrigin(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Encoding")
		w.Header().Set("Content-Type", "application/json")
		body := `{"id":"` + r.URL.Path + `"}`
		if strings.HasSuffix(r.URL.Path, "/big") {
			body = `{"id":"` + strings.Repeat("x", 4<<10) + `"}`
		}
		if len(body) >= 1<<10 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, body)
			_ = zw.Close()
			return
		}
		_, _ = io.WriteString(w, body)
	})
}

// Issue 24 item 3: Accept-Encoding variants are keyed on the coding the
// sidecar would serve, and a stored identity answer serves every client.
func TestAcceptEncodingVariantsNormalised(t *testing.T) {
	spellings := []string{"", "gzip", "gzip, deflate", "gzip, deflate, br", "gzip, deflate, br, zstd", "br, gzip"}
	up := frameworkOrigin(t)
	e := newEnv(t, up, []testRoute{{Name: "client", Pattern: "/clients/{id}", TTL: time.Minute}})
	for _, ae := range spellings {
		resp, b := e.do("GET", "/clients/701", http.Header{"Accept-Encoding": {ae}})
		if ce := resp.Header.Get("Content-Encoding"); ce != "" || b != `{"id":"/clients/701"}` {
			t.Fatalf("Accept-Encoding %q: coding %q body %q", ae, ce, b)
		}
	}
	if n := up.calls.Load(); n != 1 {
		t.Errorf("%d upstream calls for %d spellings of Accept-Encoding, want 1 (the origin answered identity)", n, len(spellings))
	}

	// A large answer is compressed for gzip clients: one gzip variant
	// serves every spelling that accepts gzip, one identity variant the
	// rest, and the small one still serves everyone. (Had a client without
	// gzip come first, the identity variant would serve all: the route had
	// not seen the origin compress.)
	calls := up.calls.Load()
	for range 2 {
		for _, ae := range append(spellings[1:], "", "identity", "br") {
			resp, b := e.do("GET", "/clients/big", http.Header{"Accept-Encoding": {ae}})
			ce := resp.Header.Get("Content-Encoding")
			switch {
			case ce == "gzip" && !strings.Contains(ae, "gzip"):
				t.Fatalf("Accept-Encoding %q got gzip", ae)
			case ce != "gzip" && strings.Contains(ae, "gzip"):
				t.Errorf("Accept-Encoding %q got %q, not the gzip variant", ae, ce)
			case ce == "" && !strings.Contains(b, "xxxx"):
				t.Fatalf("Accept-Encoding %q: identity body %q", ae, b)
			}
		}
		for _, ae := range spellings {
			if resp, _ := e.do("GET", "/clients/701", http.Header{"Accept-Encoding": {ae}}); !strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
				t.Errorf("small answer, Accept-Encoding %q after the route learned gzip: %s", ae, resp.Header.Get("Cache-Status"))
			}
		}
	}
	if n := up.calls.Load() - calls; n != 2 {
		t.Errorf("%d upstream calls for the large answer, want 2 (one gzip, one identity variant)", n)
	}
}

// The identity variant answers every coding, never another language.
func TestIdentityVariantKeepsOtherVaryHeaders(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept-Encoding, Accept-Language")
		fmt.Fprint(w, "lang="+r.Header.Get("Accept-Language"))
	})
	e := newEnv(t, up, []testRoute{{Name: "c", Pattern: "/c/{id}", TTL: time.Minute}})
	for _, tc := range []struct{ lang, ae string }{{"en", "gzip"}, {"fr", "gzip"}, {"en", ""}, {"fr", "br, gzip"}, {"de", "gzip"}} {
		if _, b := e.do("GET", "/c/1", http.Header{"Accept-Language": {tc.lang}, "Accept-Encoding": {tc.ae}}); b != "lang="+tc.lang {
			t.Errorf("%s/%q got %q", tc.lang, tc.ae, b)
		}
	}
	// en, fr and de once each; the learned Accept-Language costs one
	// more, once (see TestVaryOnWithheldHeaderIsLearned).
	if n := up.calls.Load(); n != 4 {
		t.Errorf("%d upstream calls, want 4", n)
	}
}
