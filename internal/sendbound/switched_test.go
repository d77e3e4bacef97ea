package sendbound_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/sendbound"
)

// An upgraded connection's writes are the tunnel's to bound: Switched
// lifts the bound from the connection a 101 came on, and keeps it on one
// that answered otherwise.
func TestSwitchedLiftsTheBound(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		_ = brw.Flush()
		_, _ = c.Read(make([]byte, 1)) // until the client closes
	}))
	defer up.Close()
	const d = time.Minute
	var dialer net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return sendbound.Wrap(c, d), nil
	}}
	defer tr.CloseIdleConnections()
	rt := sendbound.Switched(tr)
	for _, tc := range []struct {
		upgrade string
		want    time.Duration
	}{{"", d}, {"test", 0}} {
		var conn net.Conn
		req, _ := http.NewRequest(http.MethodGet, up.URL, nil)
		if tc.upgrade != "" {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", tc.upgrade)
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn },
		}))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := conn.(*sendbound.Conn)
		if !ok {
			t.Fatalf("connection %T, want *sendbound.Conn", conn)
		}
		if got := c.Bound(); got != tc.want {
			t.Errorf("Upgrade %q: answered %d, bound %v, want %v", tc.upgrade, resp.StatusCode, got, tc.want)
		}
		resp.Body.Close()
	}
}
