package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
)

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
