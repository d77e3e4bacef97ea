package idlebody

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/tunnel"
)

// guard is how long a test waits for a cut before it calls the body held:
// far longer than the bounds the tests set.
const guard = 10 * time.Second

func client(t *testing.T, o Options) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: Wrap(tr, o), Timeout: guard}
}

// A body whose upstream stops sending is cut once a read has waited the
// bound: the read fails with ErrIdle, a timeout, after the bytes that came.
func TestStalledBodyIsCut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "part")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	resp, err := client(t, Options{Body: 20 * time.Millisecond}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if string(got) != "part" || !errors.Is(err, ErrIdle) {
		t.Fatalf("read %q, %v; want part, ErrIdle", got, err)
	}
	var te interface{ Timeout() bool }
	if !errors.As(err, &te) || !te.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%v is not a timeout", err)
	}
}

// Only a read's wait counts: a body the client takes its time over (as a
// slow client's write would hold it) is not cut between reads.
func TestTimeBetweenReadsIsNotCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "whole body")
	}))
	defer srv.Close()
	const d = 20 * time.Millisecond
	resp, err := client(t, Options{Body: d}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * d) // no read waits meanwhile: the timer fires and rearms
	rest, err := io.ReadAll(resp.Body)
	if got := string(first) + string(rest); got != "whole body" || err != nil {
		t.Fatalf("read %q, %v; want the whole body", got, err)
	}
}

// upgrader answers 101 to an upgrade request and echoes its tunnel's
// bytes; any other request gets a 200.
func upgrader(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" || r.URL.Path == "/no" {
			_, _ = io.WriteString(w, "no tunnel")
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		if brw.Flush() == nil {
			_, _ = io.Copy(c, brw)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// upgrade asks rt to upgrade: straight to the RoundTripper, as
// ReverseProxy does (an http.Client with a Timeout would wrap the 101's
// body in one that cannot be written).
func upgrade(t *testing.T, rt http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	return rt.RoundTrip(req)
}

// An upgrade request takes a slot: past the bound it fails unsent with
// tunnel.ErrLimit; a tunnel closed, or an answer that is no 101, gives its
// slot back.
func TestTunnelSlots(t *testing.T) {
	srv := upgrader(t)
	c := client(t, Options{Body: guard, Tunnel: guard, Slots: tunnel.NewSlots(1)}).Transport
	first, err := upgrade(t, c, srv.URL)
	if err != nil || first.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("first upgrade: %v, %v; want 101", first, err)
	}
	rw, ok := first.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("a 101's body %T is not writable", first.Body)
	}
	if _, err := rw.Write([]byte("echo")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "echo" {
		t.Fatalf("tunnel read %q, %v; want echo", buf, err)
	}
	if _, err := upgrade(t, c, srv.URL); !errors.Is(err, tunnel.ErrLimit) {
		t.Fatalf("an upgrade past the bound: %v, want tunnel.ErrLimit", err)
	}
	_ = rw.Close()
	no, err := upgrade(t, c, srv.URL+"/no")
	if err != nil || no.StatusCode != http.StatusOK {
		t.Fatalf("an upgrade answered 200: %v, %v", no, err)
	}
	_, _ = io.Copy(io.Discard, no.Body)
	no.Body.Close()
	again, err := upgrade(t, c, srv.URL)
	if err != nil || again.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("an upgrade after the slot came back: %v, %v; want 101", again, err)
	}
	again.Body.Close()
}
