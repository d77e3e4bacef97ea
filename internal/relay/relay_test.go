package relay

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"sync"
	"testing"
)

// step is one thing the upstream side does to the relay.
type step struct {
	close bool
	code  int
	h     textproto.MIMEHeader
}

type interim struct {
	code int
	h    textproto.MIMEHeader
}

// serve runs steps against a relay to a real client connection, then
// answers 200 with X-Final, and returns the 1xx responses the client got
// and the final answer's header.
func serve(t *testing.T, strip func(http.Header), steps []step) ([]interim, http.Header) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Final", "kept") // set before the 1xx, sent with the 200 only
		ir := New(w, r, strip, 1<<20)
		for _, s := range steps {
			if s.close {
				ir.Close()
				continue
			}
			if err := ir.Got(s.code, s.h); err != nil {
				t.Errorf("Got: %v", err)
			}
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	got, resp := fetch1xx(t, srv)
	return got, resp.Header
}

// fetch1xx GETs srv and returns the interim responses the client saw, in
// order, and the final response, its body read.
func fetch1xx(t *testing.T, srv *httptest.Server) ([]interim, *http.Response) {
	t.Helper()
	var mu sync.Mutex
	var got []interim
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, interim{code, h})
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	mu.Lock()
	defer mu.Unlock()
	return got, resp
}

func TestInterim(t *testing.T) {
	link := textproto.MIMEHeader{"Link": {"</a.css>; rel=preload"}}
	stripKeys := func(h http.Header) { h.Del("Surrogate-Key") }
	tests := []struct {
		name  string
		strip func(http.Header)
		steps []step
		want  []interim
	}{
		{"103 relayed", nil, []step{{code: 103, h: link}}, []interim{{103, link}}},
		{"two hints, in order", nil,
			[]step{{code: 103, h: link}, {code: 103, h: textproto.MIMEHeader{"Link": {"</b.js>"}}}},
			[]interim{{103, link}, {103, textproto.MIMEHeader{"Link": {"</b.js>"}}}}},
		{"100 and 101 never", nil, []step{{code: 100, h: link}, {code: 101, h: link}}, nil},
		{"closed: dropped", nil, []step{{close: true}, {code: 103, h: link}}, nil},
		{"closed twice after one", nil, []step{{code: 103, h: link}, {close: true}, {close: true}, {code: 103, h: link}}, []interim{{103, link}}},
		{"hop-by-hop fields removed", nil,
			[]step{{code: 103, h: textproto.MIMEHeader{"Link": {"</a.css>; rel=preload"}, "Connection": {"X-Hop"}, "X-Hop": {"1"}, "Keep-Alive": {"x"}}}},
			[]interim{{103, link}}},
		{"strip applied", stripKeys,
			[]step{{code: 103, h: textproto.MIMEHeader{"Link": {"</a.css>; rel=preload"}, "Surrogate-Key": {"k"}}}},
			[]interim{{103, link}}},
		{"surrogate keys kept without strip", nil,
			[]step{{code: 103, h: textproto.MIMEHeader{"Link": {"</a.css>; rel=preload"}, "Surrogate-Key": {"k"}}}},
			[]interim{{103, textproto.MIMEHeader{"Link": {"</a.css>; rel=preload"}, "Surrogate-Key": {"k"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, final := serve(t, tt.strip, tt.steps)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("interim responses %v, want %v", got, tt.want)
			}
			if final.Get("X-Final") != "kept" || final.Get("Link") != "" {
				t.Errorf("final header %v: want X-Final kept and no Link", final)
			}
		})
	}
}

// Attach makes a real upstream's 1xx reach the relay's client; a nil relay
// leaves the request alone.
func TestAttach(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		clear(w.Header())
		_, _ = io.WriteString(w, "up")
	}))
	defer up.Close()
	var nilRelay *Interim
	out, _ := http.NewRequest(http.MethodGet, up.URL, nil)
	if nilRelay.Attach(out) != out {
		t.Fatal("a nil relay changed the request")
	}
	got, _ := serve2(t, up)
	if want := []interim{{103, textproto.MIMEHeader{"Link": {"</a.css>; rel=preload"}}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("client got %v, want %v", got, want)
	}
}

// serve2 is a server that fetches from up through a relay to its client.
func serve2(t *testing.T, up *httptest.Server) ([]interim, http.Header) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ir := New(w, r, nil, 1<<20)
		out, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, up.URL, nil)
		resp, err := up.Client().Do(ir.Attach(out))
		ir.Close()
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	}))
	defer srv.Close()
	var got []interim
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		got = append(got, interim{code, h})
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return got, resp.Header
}

// Relays is the one rule of which upstream 1xx reach a client: never a
// 100 (it answers the sidecar's own request) nor a 101 (a final answer).
func TestRelays(t *testing.T) {
	for code, want := range map[int]bool{100: false, 101: false, 102: true, 103: true, 199: true, 200: false, 99: false} {
		if got := Relays(code); got != want {
			t.Errorf("Relays(%d) = %v, want %v", code, got, want)
		}
	}
}
