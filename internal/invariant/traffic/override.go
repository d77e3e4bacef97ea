package traffic

import (
	"io"
	"net/http"
	"strings"
)

// Overrides are the ways a write the origin applies as PATCH may spell
// its method on the wire (write-method-override), as frameworks read
// them (origin.AppliedMethod): a POST with a method override field (three
// names, and an underscore spelling a CGI-style stack reads as the
// first), a POST with _method in its query (Laravel, Symfony) or form
// body (every Rails edit form), a lower-case method (Werkzeug), which the
// sidecar refuses 400 unsent (the runner's methodcase.go: it is no PATCH
// to the sidecar, and no write route's). (A GET with an override field is
// refused by the sidecar: the proxy's TestOverriddenSafeMethodRefused.)
var Overrides = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override", "X_HTTP_Method_Override", "query", "form", "lower"}

// drawOverride draws, on its own stream (Gen.override, 47), how a write
// to /r/{id} spells its method (write-method-override), and then reads
// /r/{id}/summary before and after it (route-tagged-read, respell.go):
// only the write route's invalidate tags reach that copy, so a write
// matched by its request line's method alone leaves it. It draws the same
// number of times for every request.
func (g *Gen) drawOverride(q *Request, id string) {
	roll, kind := g.override.IntN(100), g.override.IntN(len(Overrides))
	if !g.mix.Has("write-method-override") || q.Kind != "write" || !strings.HasPrefix(q.Path, "/r/") || roll >= 50 {
		return
	}
	q.Override = Overrides[kind]
	if g.mix.Has("route-tagged-read") && q.Tagged == "" {
		q.Tagged, q.Budget = "/r/"+id+"/summary", q.Budget+2*BudgetRead
	}
}

// spellMethod spells req's method as q.Override says (Overrides; "": as
// it is). Only a request with no body of its own takes the form spelling
// (the form is its body), and not one whose body is the client-body or
// trickle rows' (sent raw, and one the origin must not read); the others
// take the override field instead.
func spellMethod(req *http.Request, q *Request) {
	override := q.Override
	if q.Kind != "write" {
		override = "" // a read derived from a write (its read back) is sent as a read
	}
	if override == "form" && (q.Body != "" || q.Chunked || q.Deaf || q.BadChunk || q.Trickle) {
		override = "X-Http-Method-Override"
	}
	switch override {
	case "":
	case "query":
		req.Method = http.MethodPost
		if req.URL.RawQuery != "" {
			req.URL.RawQuery += "&"
		}
		req.URL.RawQuery += "_method=PATCH"
	case "form":
		body := "_method=patch"
		req.Method = http.MethodPost
		req.Body, req.ContentLength, req.GetBody = io.NopCloser(strings.NewReader(body)), int64(len(body)), nil
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	case "lower":
		req.Method = strings.ToLower(req.Method)
	default:
		req.Method = http.MethodPost
		req.Header[override] = []string{"PATCH"}
	}
}
