package proxy_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
)

// codedLines answers a request that accepts gzip in gzip, its
// Content-Encoding on two field lines, first (empty or identity) then
// gzip, as the prober's origin did (H1); any other request in identity.
func codedLines(first string, vary bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if vary {
			w.Header().Set("Vary", "Accept-Encoding")
		}
		if strings.Contains(strings.Join(r.Header.Values("Accept-Encoding"), ","), "gzip") {
			w.Header()["Content-Encoding"] = []string{first, "gzip"}
			fmt.Fprint(w, gzipString("coded "+r.URL.Path))
			return
		}
		fmt.Fprint(w, "plain "+r.URL.Path)
	}
}

// decoded is the body a client reads from resp and b, decoding it when
// every line of Content-Encoding together says gzip; ok is false for a
// coding the client did not accept (acceptsGzip: gzip alone).
func decoded(resp *http.Response, b string, acceptsGzip bool) (string, bool) {
	switch ce := httpcache.ContentCoding(resp.Header); {
	case ce == "":
		return b, true
	case ce == "gzip" && acceptsGzip:
		zr, err := gzip.NewReader(bytes.NewReader([]byte(b)))
		if err != nil {
			return "gzip: " + err.Error(), false
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			return "gzip: " + err.Error(), false
		}
		return string(out), true
	default:
		return fmt.Sprintf("%q in %q", b, resp.Header.Values("Content-Encoding")), false
	}
}

// Prober H1: Content-Encoding on two field lines, the first empty or
// identity and the second gzip, is one list saying gzip (RFC 9110 §5.3,
// §8.4). Every reader took the first line alone: the gzip answer a gzip
// client fetched was stored as the identity variant and served, still
// coded, to clients that accept no coding, from L1 and from Redis on a
// second replica. Now it is stored as the gzip variant (its lines folded
// into one), and a client without Accept-Encoding is answered in identity
// by both replicas.
func TestContentEncodingLinesReadAsOneList(t *testing.T) {
	redis := withRedis(t)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/ce/"):
			codedLines("", true)(w, r)
		case strings.HasPrefix(r.URL.Path, "/ce2/"):
			codedLines("identity", false)(w, r)
		default:
			codedLines("identity", true)(w, r)
		}
	})
	routes := []testRoute{
		{Name: "ce", Pattern: "/ce/{id}", TTL: 5 * time.Minute},
		{Name: "ce2", Pattern: "/ce2/{id}", TTL: 5 * time.Minute},
		{Name: "ce3", Pattern: "/ce3/{id}", TTL: 5 * time.Minute},
	}
	a := newEnv(t, up, routes, redis)
	b := newEnv(t, up, routes, redis)
	gz := http.Header{"Accept-Encoding": {"gzip"}}
	for _, path := range []string{"/ce/1", "/ce2/1", "/ce3/1"} {
		for i, step := range []struct {
			e   *env
			hdr http.Header
		}{{a, gz}, {a, nil}, {b, nil}, {a, gz}, {b, gz}} {
			resp, body := step.e.do("GET", path, step.hdr)
			// The origin's text says which coding it sent; the sidecar
			// may have decoded a gzip answer it asked for itself.
			got, ok := decoded(resp, body, step.hdr != nil)
			if !ok || got != "plain "+path && got != "coded "+path {
				t.Errorf("%s step %d (Accept-Encoding %q): read %s, want the body in a coding the client accepts (%s)", path, i, step.hdr.Get("Accept-Encoding"), got, cacheStatus(resp))
			}
			if n := len(resp.Header.Values("Content-Encoding")); n > 1 && strings.Contains(cacheStatus(resp), "hit") {
				t.Errorf("%s step %d: a stored answer kept %d Content-Encoding lines", path, i, n)
			}
		}
	}
}

// H1 on the ReverseProxy path: a request naming no coding (a POST, which
// the lean pass-through does not take) goes out with the Transport's own
// Accept-Encoding: gzip, and the Transport decodes only an answer whose
// first Content-Encoding line says gzip. An answer saying identity then
// gzip reached the client, which asked for no coding, still gzip-coded.
func TestPassThroughDecodesGzipOnTwoLines(t *testing.T) {
	up := newUpstream(t, codedLines("identity", false))
	e := newEnv(t, up, nil)
	for _, method := range []string{"POST", "GET"} {
		resp, body := e.do(method, "/pass/1", nil)
		if got, ok := decoded(resp, body, false); !ok || got != "plain /pass/1" && got != "coded /pass/1" {
			t.Errorf("%s: read %s, want the body decoded", method, got)
		}
	}
}

// H1 on the batch path: the bulk call names no coding, so the lean client
// asks for gzip itself and decodes it (as the Transport does); an answer
// saying identity then gzip was left coded, and its elements did not
// parse. Read as one list, it is decoded and split as any other.
func TestBulkAnswerGzipOnTwoLines(t *testing.T) {
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		rec := httptest.NewRecorder()
		usersAnswer(func(string) bool { return true })(rec, r, ids)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header()["Content-Encoding"] = []string{"identity", "gzip"}
			fmt.Fprint(w, gzipString(rec.Body.String()))
			return
		}
		fmt.Fprint(w, rec.Body.String())
	})
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, 10*time.Millisecond), list}, withRedis(t))
	for _, path := range []string{"/users/1", "/users?ids=2,3"} {
		resp, body := e.do("GET", path, nil)
		if resp.StatusCode != http.StatusOK || len(resp.Header.Values("Content-Encoding")) > 0 || !strings.Contains(body, `"name":"user-`) {
			t.Errorf("%s: %d %q %.80q (%s)", path, resp.StatusCode, resp.Header.Values("Content-Encoding"), body, cacheStatus(resp))
		}
	}
}
