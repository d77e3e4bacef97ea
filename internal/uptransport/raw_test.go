package uptransport

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/rawio"
)

// The upstream transport's connections read and write through
// internal/rawio's raw calls (Linux): the fill's, the bulk call's and
// ReverseProxy's round trips enter no syscall.Syscall (rawio's doc).
func TestTransportConnsAreRaw(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	tr := New(5*time.Second, 0, 0)
	defer tr.CloseIdleConnections()
	var conn any
	r, _ := http.NewRequest("GET", up.URL, nil)
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn },
	}))
	resp, err := tr.RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "ok" {
		t.Fatalf("body %q, %v", b, err)
	}
	for {
		// The framing scan's wrapper (internal/upframe), the write
		// bound's (internal/sendbound).
		w, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = w.NetConn()
	}
	c, ok := conn.(*rawio.TCPConn)
	if !ok {
		t.Fatalf("transport connection %T, want *rawio.TCPConn", conn)
	}
	if rd, wr := c.Calls(); rd == 0 || wr == 0 {
		t.Errorf("%d raw reads, %d raw writes; want both > 0", rd, wr)
	}
}
