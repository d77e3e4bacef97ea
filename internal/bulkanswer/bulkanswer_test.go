package bulkanswer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/bulkanswer"
	"github.com/sidecache/sidecache/internal/forward"
)

// TestNotFor: a private answer is its opener's alone (the same header
// map, not an equal one); an answer made without a header its Vary names
// is no answer to a request that carries it, and teaches the route the
// header; a shareable answer is everyone's.
func TestNotFor(t *testing.T) {
	rules := forward.New(forward.Config{Route: "users"})
	opener := http.Header{"Accept-Language": {"en"}}
	twin := opener.Clone()
	out := http.Header{"X-Request-Id": {"r1"}}
	plain := &bulkanswer.Answer{Call: bulkanswer.NewCall(opener, http.Header{}, out, 0, rules, never)}
	if plain.Call.ReqID != "r1" {
		t.Errorf("ReqID %q", plain.Call.ReqID)
	}
	if plain.NotFor(false, twin) || !plain.MadeFor(opener) || plain.MadeFor(twin) {
		t.Error("shareable answer: NotFor a twin, or MadeFor wrong")
	}
	if !plain.NotFor(true, twin) || plain.NotFor(true, opener) {
		t.Error("private answer: not the opener's alone")
	}
	varied := &bulkanswer.Answer{Call: bulkanswer.NewCall(opener, http.Header{"Vary": {"X-Tenant, Accept-Encoding"}}, out, 0, rules, never)}
	if varied.NotFor(false, opener) {
		t.Error("an answer made without X-Tenant: no answer to the opener, which sent none")
	}
	if rules.Forwards("X-Tenant") {
		t.Fatal("the route learned X-Tenant from a request that did not send it")
	}
	if !varied.NotFor(false, http.Header{"X-Tenant": {"a"}}) {
		t.Error("an answer made without X-Tenant answered a request that carries it")
	}
	if !rules.Forwards("X-Tenant") {
		t.Error("the route did not learn X-Tenant")
	}
	// A call that sent globex's X-Tenant (the route learned it before the
	// call left) answers no request of another tenant or of none: judged
	// by what it sent, whatever the route forwards now.
	sent := http.Header{"X-Request-Id": {"r2"}, "X-Tenant": {"globex"}}
	globex := &bulkanswer.Answer{Call: bulkanswer.NewCall(http.Header{"X-Tenant": {"globex"}}, http.Header{"Vary": {"X-Tenant"}}, sent, 0, rules, never)}
	if !globex.NotFor(false, http.Header{}) || !globex.NotFor(false, http.Header{"X-Tenant": {"acme"}}) {
		t.Error("globex's element answered a request of no tenant, or of acme")
	}
	if globex.NotFor(false, http.Header{"X-Tenant": {"globex"}}) {
		t.Error("globex's element is no answer to another globex request")
	}
	var none *bulkanswer.Answer
	if none.NotFor(false, opener) || none.MadeFor(opener) {
		t.Error("nil answer")
	}
}

// A member is held to what the call put on the wire, and its own
// User-Agent to what its own fetch would: the call's empty User-Agent
// (upreq's mark that keeps Go's own off) sent none, so the answer is no
// answer to a member with one, and the route learns it; a member with an
// empty one carried none a fetch could send, so the answer made without
// one is its own (on the old code it fetched again, for the same
// answer, and taught the route User-Agent); a member with two gets what
// its first alone would have been answered (net/http sends one).
func TestWithheldFromUserAgent(t *testing.T) {
	rules := forward.New(forward.Config{Route: "users"})
	vary := http.Header{"Vary": {"User-Agent"}}
	none := &bulkanswer.Answer{Call: bulkanswer.NewCall(http.Header{}, vary, http.Header{"User-Agent": {""}}, 0, rules, never)}
	if none.WithheldFrom(http.Header{"User-Agent": {""}}) || none.WithheldFrom(http.Header{}) {
		t.Error("the answer to no User-Agent withheld from a member that sends none")
	}
	if rules.Forwards("User-Agent") {
		t.Fatal("the route learned User-Agent from a member that sends none")
	}
	if !none.WithheldFrom(http.Header{"User-Agent": {"mobile/1.0"}}) {
		t.Error("the answer to no User-Agent answered a member with one")
	}
	if !rules.Forwards("User-Agent") {
		t.Error("the route did not learn User-Agent")
	}
	mobile := &bulkanswer.Answer{Call: bulkanswer.NewCall(http.Header{}, vary, http.Header{"User-Agent": {"mobile/1.0"}}, 0, rules, never)}
	if mobile.WithheldFrom(http.Header{"User-Agent": {"mobile/1.0", "other/2.0"}}) || !mobile.WithheldFrom(http.Header{"User-Agent": {"other/2.0"}}) {
		t.Error("a member held to other values than its own fetch would send")
	}
}

// never is a route's headers never forwarded, as the proxy's.
func never(n string) bool { return n == "Connection" || n == "Forwarded" }

// TestFailed: the status each way a load fails answers.
func TestFailed(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{batch.ErrQueueFull, http.StatusServiceUnavailable},
		{batch.ErrDeadline, http.StatusGatewayTimeout},
		{fmt.Errorf("%w: %w", bulkanswer.ErrBulk, context.DeadlineExceeded), http.StatusGatewayTimeout},
		{fmt.Errorf("%w: status 502", bulkanswer.ErrBulk), http.StatusBadGateway},
	} {
		if got := bulkanswer.Failed(tc.err); got.Code != tc.code || !errors.Is(got, tc.err) {
			t.Errorf("Failed(%v) = %d, want %d", tc.err, got.Code, tc.code)
		}
	}
	if !errors.Is(bulkanswer.ErrAnswerTooLarge, bulkanswer.ErrElementTooLarge) {
		t.Error("ErrAnswerTooLarge does not wrap ErrElementTooLarge")
	}
}

// TestNotFoundOwnBody: each absent id's entry owns its body; a write
// into one (or an append within its capacity) is no other 404's.
func TestNotFoundOwnBody(t *testing.T) {
	const want = `{"error":"not found"}`
	a, b := bulkanswer.NotFound(time.Time{}), bulkanswer.NotFound(time.Time{})
	a.Body[2] = 'X'
	_ = append(a.Body[:1], "Y"...)
	if string(b.Body) != want {
		t.Fatalf("another 404's body after one was written: %q, want %q", b.Body, want)
	}
	if c := bulkanswer.NotFound(time.Time{}); string(c.Body) != want {
		t.Fatalf("a later 404's body: %q, want %q", c.Body, want)
	}
}
