package origin

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The mismatch-vary row's resources: /n/<MismatchBase+n>, on the
// freshness: origin route n, ids no other row draws (those use 1-64). Each
// is answered so that one read of it, revalidating, would wish for three
// upstream calls (proberA's p5.py):
//
//   - the first call: 200, ETag "a", max-age=0 (stored, stale at once);
//   - a conditional call: 304 with ETag "b", a validator that is not the
//     stored one, so the 304 selects no stored response (RFC 9111 §4.3.4)
//     and the sidecar fetches again, unconditionally;
//   - any later unconditional call: 200, ETag "c", Vary: MismatchField(n)
//     — a header the client sends and the fetch did not carry, so the
//     sidecar would ask once more with it. The body and MismatchSeen say
//     the value the call carried.
//
// The origin records each call by its path (TakeMismatchCalls), which is
// unique to one client request of the row: so the calls are attributed
// per client request, not per round.

// MismatchBase is the lowest id of the row's resources.
const MismatchBase = 900000

// MismatchSeen is the answer field holding the value of the Vary'd field
// the call carried.
const MismatchSeen = "X-Mv-Seen"

// MismatchPath is the row's n-th resource.
func MismatchPath(n int) string { return "/n/" + strconv.Itoa(MismatchBase+n) }

// MismatchField is the field the n-th resource's later answers vary on:
// one of its own, so that every resource makes the route learn a header
// anew (a learned one is sent from the first call on).
func MismatchField(n int) string { return "X-Mv-" + strconv.Itoa(n) }

// mismatch answers a call to one of the row's resources; it reports
// whether r was one.
func (o *Origin) mismatch(w http.ResponseWriter, r *http.Request) bool {
	id, ok := strings.CutPrefix(r.URL.Path, "/n/")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(id)
	if err != nil || n < MismatchBase {
		return false
	}
	field := MismatchField(n - MismatchBase)
	inm, val := r.Header.Get("If-None-Match"), r.Header.Get(field)
	o.mu.Lock()
	if o.mismatches == nil {
		o.mismatches = map[string][]string{}
	}
	calls := o.mismatches[r.URL.Path]
	first := len(calls) == 0
	o.mismatches[r.URL.Path] = append(calls, fmt.Sprintf("If-None-Match %q %s %q", inm, field, val))
	o.mu.Unlock()
	h := w.Header()
	h.Set("Cache-Control", "max-age=0")
	switch {
	case inm != "":
		h.Set("ETag", `"b"`)
		w.WriteHeader(http.StatusNotModified)
	case first:
		h.Set("ETag", `"a"`)
		_, _ = io.WriteString(w, "first")
	default:
		h.Set("ETag", `"c"`)
		h.Set("Vary", field)
		h.Set(MismatchSeen, val)
		_, _ = io.WriteString(w, "seen="+val)
	}
	return true
}

// TakeMismatchCalls returns the calls path received since the last
// TakeMismatchCalls of it, one line each.
func (o *Origin) TakeMismatchCalls(path string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	calls := o.mismatches[path]
	o.mismatches[path] = []string{}
	return calls
}
