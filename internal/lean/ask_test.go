package lean_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/lean"
)

// A request whose answer is not there the instant it is written is read
// with one read(2), made once the answer came: the request is written
// inside the poller's read call (rawio.Conn.Ask), so no read finds the
// socket empty (EAGAIN) first. The upstream answers 20 ms late, so
// without Ask every call makes two reads, the first one empty. Send (the
// bulk call and the fill) and RoundTrip (the pass-through) both.
func TestLeanOneReadPerAnswer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	up := newScriptedUpstream(t, func(int, string) string {
		time.Sleep(20 * time.Millisecond)
		return okAnswer
	})
	cl := lean.New(up.url(), 5*time.Second, 0, 0)
	const calls = 3
	for range calls {
		resp, err := cl.Send(outRequest(t.Context(), up.url(), "/users?ids=1,2", http.Header{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		if b := readBody(t, resp); b != "ok" {
			t.Fatalf("body %q", b)
		}
	}
	reads, writes := lean.IdleCalls(cl)
	// The reuses' peeks (unsolicited, MSG_PEEK) count as reads too.
	if want := int64(calls + calls - 1); reads != want || writes != calls {
		t.Errorf("Send: %d raw reads, %d raw writes for %d calls; want %d (one per answer, one peek per reuse) and %d", reads, writes, calls, want, calls)
	}

	r := httptest.NewRequest("GET", "/users/1", nil)
	resp, c, err := cl.RoundTrip(r.Context(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := readBody(t, resp); b != "ok" {
		t.Fatalf("body %q", b)
	}
	r1, w1 := lean.RawCalls(c)
	if r1-reads != 2 || w1-writes != 1 { // a peek (reuse) and the answer's read
		t.Errorf("RoundTrip: %d raw reads, %d raw writes; want 2 (the reuse's peek, the answer's read) and 1", r1-reads, w1-writes)
	}
	cl.Put(c)
}
