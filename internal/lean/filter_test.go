package lean_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sidecache/sidecache/internal/lean"
)

// FilterTrailers drops the filtered fields from the names announced at
// once, and from the trailers that come, announced or not, once the body
// has been read to its end.
func TestFilterTrailers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum, X-Drop")
		_, _ = io.WriteString(w, "body") // no length: chunked, trailers follow
		w.Header().Set("X-Sum", "42")
		w.Header().Set("X-Drop", "1")
		w.Header().Set(http.TrailerPrefix+"Surrogate-Key", "secret") // unannounced
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	calls := 0
	lean.FilterTrailers(resp, func(h http.Header) {
		calls++
		h.Del("X-Drop")
		h.Del("Surrogate-Key")
	})
	if _, ok := resp.Trailer["X-Drop"]; ok || len(resp.Trailer) != 1 {
		t.Fatalf("announced trailers %v: want X-Sum alone", resp.Trailer)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "body" {
		t.Fatalf("body %q, %v", b, err)
	}
	if len(resp.Trailer) != 1 || resp.Trailer.Get("X-Sum") != "42" {
		t.Fatalf("trailers after the body %v: want X-Sum: 42 alone", resp.Trailer)
	}
	if calls < 2 {
		t.Fatalf("filter ran %d times, want once on the names and again at the end", calls)
	}
}

// An answer with a length has no trailers to wait for, and an upgrade's
// body is the connection: neither body is wrapped.
func TestFilterTrailersLeavesBody(t *testing.T) {
	for _, resp := range []*http.Response{
		{StatusCode: http.StatusOK, ContentLength: 4, Body: io.NopCloser(nil), Trailer: http.Header{}},
		{StatusCode: http.StatusSwitchingProtocols, ContentLength: -1, Body: io.NopCloser(nil)},
	} {
		body := resp.Body
		lean.FilterTrailers(resp, func(http.Header) {})
		if resp.Body != body {
			t.Errorf("status %d, length %d: body wrapped", resp.StatusCode, resp.ContentLength)
		}
	}
}

// An answer whose Connection names nothing keeps its body as it is (no
// wrapper on the common path); one whose Connection names a field loses
// it from the announced trailers at once.
func TestDropConnectionTrailers(t *testing.T) {
	plain := &http.Response{StatusCode: http.StatusOK, ContentLength: -1, Body: io.NopCloser(nil),
		Header: http.Header{"Connection": {"keep-alive"}}, Trailer: http.Header{"X-Sum": nil}}
	body := plain.Body
	lean.DropConnectionTrailers(plain)
	if len(plain.Trailer) != 1 || plain.Body != body {
		t.Errorf("trailers %v, body wrapped %v: want X-Sum kept, the body as it was", plain.Trailer, plain.Body != body)
	}
	hop := &http.Response{StatusCode: http.StatusOK, ContentLength: -1, Body: io.NopCloser(nil),
		Header: http.Header{"Connection": {"close, x-hop"}}, Trailer: http.Header{"X-Sum": nil, "X-Hop": nil}}
	lean.DropConnectionTrailers(hop)
	if _, ok := hop.Trailer["X-Hop"]; ok || len(hop.Trailer) != 1 {
		t.Errorf("trailers %v: want X-Sum alone", hop.Trailer)
	}
}

// aheadBody is a body whose reader has reached the end on the wire before
// it has returned every byte (a decoder that read ahead, as
// http.Transport's gzip does): its first read fills resp.Trailer, as the
// transport does at the wire's end, and data still follows.
type aheadBody struct {
	resp    *http.Response
	left    int
	trailer http.Header
}

func (b *aheadBody) Read(p []byte) (int, error) {
	if b.trailer != nil {
		if b.resp.Trailer == nil {
			b.resp.Trailer = http.Header{}
		}
		for k, v := range b.trailer {
			b.resp.Trailer[k] = v
		}
		b.trailer = nil
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), b.left, 4)
	b.left -= n
	return n, nil
}

func (b *aheadBody) Close() error { return nil }

// A field the filter drops is gone from resp.Trailer as soon as the read
// that brought it returns, not only at the body's end: a stream that
// announces the trailers after reading part of a decoded body must not
// find it there. Both wrappers: Connection's names and FilterTrailers'.
func TestTrailersFilteredBeforeBodyEnd(t *testing.T) {
	for _, announced := range []http.Header{nil, {"X-Sum": nil}} {
		for _, wrap := range []struct {
			name string
			f    func(*http.Response)
		}{
			{"DropConnectionTrailers", lean.DropConnectionTrailers},
			{"FilterTrailers", func(r *http.Response) { lean.FilterTrailers(r, func(h http.Header) { h.Del("X-Hop") }) }},
		} {
			resp := &http.Response{StatusCode: http.StatusOK, ContentLength: -1,
				Header: http.Header{"Connection": {"x-hop"}}, Trailer: announced.Clone()}
			resp.Body = &aheadBody{resp: resp, left: 8, trailer: http.Header{"X-Sum": {"42"}, "X-Hop": {"h"}}}
			wrap.f(resp)
			if _, err := resp.Body.Read(make([]byte, 4)); err != nil {
				t.Fatal(err)
			}
			if _, ok := resp.Trailer["X-Hop"]; ok {
				t.Errorf("%s, announced %v: X-Hop in the trailers before the body's end: %v", wrap.name, announced, resp.Trailer)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			if len(resp.Trailer) != 1 || resp.Trailer.Get("X-Sum") != "42" {
				t.Errorf("%s, announced %v: trailers at the end %v, want X-Sum: 42 alone", wrap.name, announced, resp.Trailer)
			}
		}
	}
}
