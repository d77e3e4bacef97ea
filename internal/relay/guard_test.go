package relay

import (
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"testing"
)

// guardServe writes n 103s through Guard as ReverseProxy does (fields set
// in the header, then WriteHeader), then a 200, over a real connection;
// it returns the 1xx the client got. http10 makes Guard see an HTTP/1.0
// request.
func guardServe(t *testing.T, n int, http10 bool) []textproto.MIMEHeader {
	t.Helper()
	strip := func(h http.Header) { h.Del("Surrogate-Key") }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if http10 {
			r = r.Clone(r.Context())
			r.ProtoMajor, r.ProtoMinor = 1, 0
		}
		g := Guard(w, r, strip)
		if u, ok := g.(interface{ Unwrap() http.ResponseWriter }); !ok || u.Unwrap() != w {
			t.Error("Unwrap does not return the wrapped writer")
		}
		for i := range n {
			g.Header().Set("Link", "</a.css>; rel=preload; n="+strconv.Itoa(i))
			g.Header().Set("Surrogate-Key", "secret")
			g.WriteHeader(http.StatusEarlyHints)
			for k := range g.Header() {
				delete(g.Header(), k) // as ReverseProxy after each 1xx
			}
		}
		g.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	interims, resp := fetch1xx(t, srv)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("final status %d", resp.StatusCode)
	}
	got := make([]textproto.MIMEHeader, len(interims))
	for i, in := range interims {
		got[i] = in.h
	}
	return got
}

func TestGuardStripsAndRelays(t *testing.T) {
	got := guardServe(t, 1, false)
	if len(got) != 1 {
		t.Fatalf("%d interim responses, want 1", len(got))
	}
	if got[0].Get("Link") == "" || got[0].Get("Surrogate-Key") != "" {
		t.Fatalf("103 fields %v: want Link kept, Surrogate-Key stripped", got[0])
	}
}

func TestGuardBoundsCount(t *testing.T) {
	if got := guardServe(t, MaxRelayed+3, false); len(got) != MaxRelayed {
		t.Fatalf("%d interim responses, want %d", len(got), MaxRelayed)
	}
}

func TestGuardNoneToHTTP10(t *testing.T) {
	if got := guardServe(t, 2, true); len(got) != 0 {
		t.Fatalf("%d interim responses to an HTTP/1.0 request, want 0", len(got))
	}
}

// An upstream's 100 Continue answers the sidecar's own request: the
// client's Expect: 100-continue is answered by net/http's server when the
// proxy reads the body. ReverseProxy hands the upstream's 100 to Guard as
// well (Got1xxResponse), and the client got two (the expect fixer saw the
// harness's writes read past a second 100). Interim.Got drops it; so does
// Guard now. A 103 still passes.
func TestGuardDropsContinue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := Guard(w, r, nil)
		g.WriteHeader(http.StatusContinue)
		g.Header().Set("Link", "</a.css>; rel=preload")
		g.WriteHeader(http.StatusEarlyHints)
		g.Header().Del("Link")
		g.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	interims, resp := fetch1xx(t, srv)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("final status %d", resp.StatusCode)
	}
	if len(interims) != 1 || interims[0].code != http.StatusEarlyHints {
		t.Fatalf("interim responses %+v, want the 103 alone", interims)
	}
}
