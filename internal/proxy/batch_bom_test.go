package proxy_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/route"
)

// TestBulkAnswerWithBOM: a bulk answer that starts with a UTF-8 byte order
// mark, as a .NET or PowerShell app writing through an Encoding.UTF8
// writer sends, is the same array (RFC 8259 §8.1: a parser may ignore the
// mark). It failed every bulk call as broken JSON, with no retry: every
// batched read and split list of the route answered 502, for an upstream
// that answers each id directly. The elements are stored without it.
func TestBulkAnswerWithBOM(t *testing.T) {
	good := usersAnswer(func(string) bool { return true })
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		_, _ = w.Write([]byte("\xef\xbb\xbf"))
		good(w, r, ids)
	})
	list := testRoute{Name: "users-list", Pattern: "/users", Split: &route.Split{Param: "ids", RouteName: "user"}}
	e := newEnv(t, o.upstream, []testRoute{userRoute(2, 20*time.Millisecond), list})
	for i, a := range fetchAll(e, []string{"/users/1", "/users/2"}, nil) {
		if want := userJSON([]string{"1", "2"}[i], nil); a.err != nil || a.code != http.StatusOK || a.body != want {
			t.Errorf("/users/%d: %d %q %v (%s), want 200 %q", i+1, a.code, a.body, a.err, a.header.Get("Cache-Status"), want)
		}
	}
	r, b := e.get("/users?ids=1,2,3")
	if want := "[" + userJSON("1", nil) + "," + userJSON("2", nil) + "," + userJSON("3", nil) + "]"; r.StatusCode != http.StatusOK || b != want {
		t.Errorf("list: %d %q (%s), want 200 %q", r.StatusCode, b, r.Header.Get("Cache-Status"), want)
	}
	if n := len(o.snapshot()); n != 2 {
		t.Errorf("%d bulk calls, want 2 (ids 1 and 2 stored, then 3 alone)", n)
	}
}
