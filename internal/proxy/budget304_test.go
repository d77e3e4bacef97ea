package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// One client request costs at most 2 upstream calls on every path (the
// README's budget): its fetch and one more. Revalidating a stale entry
// can wish for two more: a 304 whose ETag is not the stored one confirms
// another response (RFC 9111 §4.3.4), so the fetch is made again
// unconditionally; and that answer may vary on a header the request
// carried but the fetch did not send, so it would be asked once more with
// it. On the old code the one read made three calls (If-None-Match "a",
// plain, with X-Bar), as proberA's p5.py showed. Now the third is not
// made: the answer for another variant is not served either, the client
// gets a 502.
func TestRevalidateMismatchThenVaryStaysInBudget(t *testing.T) {
	var mu sync.Mutex
	var calls []string // each call's If-None-Match and X-Bar
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		inm, bar := r.Header.Get("If-None-Match"), r.Header.Get("X-Bar")
		mu.Lock()
		calls = append(calls, "inm="+inm+" x-bar="+bar)
		n := len(calls)
		mu.Unlock()
		switch {
		case n == 1:
			w.Header().Set("ETag", `"a"`)
			_, _ = io.WriteString(w, "first")
		case inm != "":
			w.Header().Set("ETag", `"b"`) // not the stored "a"
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("ETag", `"c"`)
			w.Header().Set("Vary", "X-Bar")
			_, _ = io.WriteString(w, "x-bar="+bar)
		}
	})
	c := &clock{}
	rt := clientRoute
	e := newEnv(t, up, []testRoute{rt}, withClock(c))
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "http://api.example/clients/1", nil)
		req.Header.Set("X-Bar", "1")
		e.h.ServeHTTP(rec, req)
		return rec
	}
	if rec := get(); rec.Code != http.StatusOK {
		t.Fatalf("first read: %d", rec.Code)
	}
	e.l1.Wait()
	c.advance(rt.TTL + time.Second) // stale, kept for revalidation
	rec := get()
	mu.Lock()
	defer mu.Unlock()
	if n := len(calls) - 1; n > 2 {
		t.Errorf("one read made %d upstream calls, over its budget of 2: %v", n, calls[1:])
	}
	if body := rec.Body.String(); rec.Code == http.StatusOK && body != "x-bar=1" {
		t.Errorf("the read was answered %q, another variant's body", body)
	} else if rec.Code != http.StatusOK && rec.Code != http.StatusBadGateway {
		t.Errorf("the read was answered %d, want 200 or 502", rec.Code)
	}
}
