package check

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Now is the clock the version checks order reads and writes by: this
// process's, which is also the in-process replicas' clock.
func Now() time.Time { return time.Now() }

// Coding is the content coding an answer of header h says it is in, as a
// client that reads every field line must take it (RFC 9110 §5.3: the
// lines are one list): its codings joined by ",", lowercased, without
// empty elements or identity; "" for none. Header.Get's first line alone
// takes `Content-Encoding: identity` then `: gzip` for identity (the
// coding-lines row).
func Coding(h http.Header) string {
	var cs []string
	for _, line := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(line, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				cs = append(cs, c)
			}
		}
	}
	return strings.Join(cs, ",")
}

// ReadBody reads the whole answer, decoding a gzip coding.
func ReadBody(resp *http.Response) ([]byte, error) {
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 && Coding(resp.Header) == "gzip" { // a HEAD answer has no body to decode
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
	}
	return b, nil
}

// Answer applies every invariant to one answer:
//
//   - coding: the Content-Encoding is one the request accepted (no
//     Accept-Encoding accepts identity only, as clients that send none
//     expect, though RFC 9110 §12.5.3 would allow any);
//   - identity: every dimension the answer depends on (its stamp's By)
//     has the value this request sent, and a Set-Cookie was minted for
//     this client's address;
//   - resource / query / unkeyed: the answer is for the resource and
//     the query this request names (as the origin parses them), and never
//     echoes another request's X-Request-Id;
//   - cache-status: the Cache-Status ttl agrees with how the answer was
//     served (cachestatus.go);
//   - own-write / max-lag: a read's version is not older than a write
//     acknowledged through the same replica before the read was sent, nor
//     older than any write acknowledged more than max_lag (plus margin)
//     before it was sent.
func (ch *Checker) Answer(q *traffic.Request, resp *http.Response, body []byte, start, end time.Time) {
	ch.checkCacheStatus(q, resp) // cachestatus.go
	ce := Coding(resp.Header)
	switch ce {
	case "":
	case "gzip":
		if !origin.AcceptsGzip(q.Hdr.Values("Accept-Encoding")) {
			ch.Violate("coding", "%s: answered %d with Content-Encoding gzip (%s)", q, resp.StatusCode, resp.Header.Get("Cache-Status"))
		}
	default:
		ch.Violate("coding", "%s: Content-Encoding %q", q, resp.Header.Values("Content-Encoding"))
	}
	// The withheld-field row: the field a qualified private or no-cache
	// names holds the address of the client whose request fetched it.
	if v := resp.Header.Values(origin.SecretHeader); len(v) > 0 && (len(v) > 1 || v[0] != q.Who.Addr) {
		ch.Violate("identity", "%s: %s %q, another client's field a qualified private/no-cache withholds (%s)", q, origin.SecretHeader, v, resp.Header.Get("Cache-Status"))
	}
	for _, sc := range resp.Header.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(sc, "minted="); ok {
			if v, _, _ = strings.Cut(v, ";"); v != q.Who.Addr {
				ch.Violate("identity", "%s: Set-Cookie minted for %s (%s)", q, v, resp.Header.Get("Cache-Status"))
			}
		}
	}
	for _, sc := range resp.Header.Values("Set-Cookie2") {
		if v, ok := strings.CutPrefix(sc, `minted="`); ok {
			if v, _, _ = strings.Cut(v, `"`); v != q.Who.Addr {
				ch.Violate("identity", "%s: Set-Cookie2 minted for %s (%s)", q, v, resp.Header.Get("Cache-Status"))
			}
		}
	}
	if resp.Header.Get(origin.LieHeader) != "" {
		ch.Violate("upstream-lie", "%s: answered %d with an origin answer made against HTTP (a 304 to no condition, or Content-Length beside chunked) (%s)", q, resp.StatusCode, resp.Header.Get("Cache-Status"))
	}
	if q.Route == "u" && q.Kind == "read" && origin.AbsentPath(q.Path) {
		// An id the origin does not have (bulk-null): its 404 called
		// directly, whether its bulk answer left it out or wrote null
		// in its place (no element either way).
		if resp.StatusCode != http.StatusNotFound {
			ch.Violate("bulk-null", "%s: an id the origin does not have (404 called directly, null or left out in its bulk answers) answered %d after %v (%s): %.120q", q, resp.StatusCode, end.Sub(start).Round(time.Millisecond), resp.Header.Get("Cache-Status"), body)
		}
		ch.Count("bulk-null-absent-read", 1)
		return
	}
	if ok := resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusPartialContent; !ok {
		// The origin never fails a good ID: only a bad one can make
		// its bulk call fail, and that must not cost the others — a
		// per-ID read's, nor a list's whose ids are all good, however
		// many requests share the batches (crowd rounds).
		crowd := ""
		if q.Crowd {
			crowd = " in a crowd round"
		}
		// How long the answer took from the request's sending: a 504
		// that came upstream.timeout (3 s) or more after it is a
		// deadline run out (a bulk call's, or its batch's unsent), one
		// that came sooner is not, which the status alone cannot tell.
		took := end.Sub(start).Round(time.Millisecond)
		switch {
		case ch.crowdTimeout(q, resp, body, end):
			ch.Count("crowd-timeout-504", 1)
		case q.Route == "u" && q.Kind == "read" && origin.Resource(q.Path) != "" && origin.GoodID(q.Path):
			ch.Violate("collateral", "%s: a good ID answered %d%s after %v (%s): %.120q", q, resp.StatusCode, crowd, took, resp.Header.Get("Cache-Status"), body)
		case q.Kind == "list" && q.Route == "u" && goodIDs(q.Ids):
			absent := ""
			if n := len(slices.DeleteFunc(slices.Clone(q.Ids), func(id string) bool { return !origin.AbsentPath("/" + id) })); n > 0 {
				absent = fmt.Sprintf(" (%d of them ids the origin does not have: bulk-null)", n)
			}
			ch.Violate("collateral", "%s: a list of %d good IDs%s answered %d%s after %v (%s): %.120q", q, len(q.Ids), absent, resp.StatusCode, crowd, took, resp.Header.Get("Cache-Status"), body)
		}
	}
	ch.checkHeld(q, resp, start) // stale.go
	if resp.StatusCode == http.StatusNotModified {
		ch.checkNotModified(q, resp, start, end)
		return
	}
	if resp.StatusCode == http.StatusPartialContent && q.Hdr.Get("Range") == "" && q.Kind == "list" && PassesThrough(q.Ids) {
		// The origin's own 206 to this very list (bulk-206), which the
		// sidecar passed through whole (list-as-asked): relayed as any
		// pass-through relays its upstream's answer, Content-Range and
		// all, never stored nor taken for the whole list.
		ch.Count("list-as-asked-206", 1)
		return
	}
	if resp.StatusCode == http.StatusPartialContent && q.Hdr.Get("Range") == "" {
		ch.Violate("range", "%s: 206 (%s) to a request without Range (%s)", q, resp.Header.Get("Content-Range"), resp.Header.Get("Cache-Status"))
		return
	}
	if q.Method == http.MethodHead {
		ch.checkHead(q, resp, start, end)
		return
	}
	switch {
	case q.Kind == "list" && resp.StatusCode == http.StatusOK:
		ch.mu.Lock()
		ch.checked["list"]++
		ch.mu.Unlock()
		if cs := resp.Header.Get("Cache-Status"); ch.cfg.MaxBodyBytes > 0 && strings.Contains(cs, `detail="split`) {
			// Reassembled in the sidecar's memory: within the bound of
			// one answer, else passed through whole (D3).
			if len(body) > ch.cfg.MaxBodyBytes {
				ch.Violate("list-bound", "%s: a list of %d bytes reassembled, over max_body_bytes %d (%s)", q, len(body), ch.cfg.MaxBodyBytes, cs)
			}
			ch.Count("list-bound", 1)
		}
		var all []*origin.Stamp
		// The origin's own list (passed through) may start with a
		// byte order mark (bulk-bom), which a client's parser may skip.
		if err := json.Unmarshal(bytes.TrimPrefix(body, []byte(origin.BOM)), &all); err != nil {
			ch.Violate("garbled", "%s: list answer: %v", q, err)
			return
		}
		var sts []origin.Stamp
		for _, st := range all {
			if st == nil {
				// The origin's own list (passed through) writes null
				// for an id it does not have (bulk-null): no element.
				ch.Count("bulk-null-passed", 1)
				continue
			}
			sts = append(sts, *st)
		}
		if q.Route == "s" && strings.Contains(resp.Header.Get("Cache-Status"), " stale=") {
			ch.Count("split-stale-s", 1) // stale ids reached the checks below
		}
		asked := canonIDs(q.Ids)
		if present := slices.DeleteFunc(slices.Clone(asked), func(id string) bool { return origin.AbsentPath("/" + id) }); len(present) < len(asked) {
			// Ids the origin does not have are left out (bulk-null),
			// as from the upstream directly.
			asked = present
			ch.Count("bulk-null-list", 1)
		}
		for i, st := range sts {
			// The origin's own list names some ids padded
			// (bulk-echo-spelling): the element of the id asked.
			if id := canonIDs([]string{st.ID})[0]; id != st.ID {
				sts[i].ID = id
				ch.Count("bulk-echo-spelling", 1)
			}
		}
		ch.checkAsAsked(q, resp, sts, asked)
		for _, st := range sts {
			if !slices.Contains(asked, st.ID) || st.Res != q.Route+"/"+st.ID {
				ch.Violate("resource", "%s: list element %s/%s not asked for", q, st.ID, st.Res)
			}
			ch.mu.Lock()
			ch.versionLocked(q, st, start, "element "+st.ID+" of "+resp.Header.Get("Cache-Status")) // write-list
			ch.mu.Unlock()
			ch.checkPart(q, resp, st) // stale.go
			if len(st.By) > 0 {
				ch.Count("bulk-per-address", 1) // the identity check reached them
			}
			ch.checkCookie(q, resp, st, "list element "+st.ID)
			for _, k := range sortedDims(st.By) {
				if v := st.By[k]; v != q.Sent[k] {
					ch.Violate("identity", "%s: list element %s made for %s=%.40q, this request sent %.40q (%s)", q, st.ID, k, v, q.Sent[k], resp.Header.Get("Cache-Status"))
				}
			}
		}
		if sts == nil {
			sts = []origin.Stamp{}
		}
		ch.noteHeld(q, sts, start, end)
		ch.remember(q, resp, nil, sts)
	case q.Kind == "write" && q.Ids != nil:
		ch.ackList(q, resp, body, end) // write-list
	case bytes.HasPrefix(body, []byte(`{"`)):
		var st origin.Stamp
		if err := json.Unmarshal(body, &st); err != nil || st.Res == "" {
			if resp.StatusCode == http.StatusOK && q.Route != "u" {
				ch.Violate("garbled", "%s: %d %.80q", q, resp.StatusCode, body)
			}
			return
		}
		if q.Route == "u" && len(st.By) > 0 {
			ch.Count("bulk-per-address", 1)
		}
		if resp.StatusCode == http.StatusOK {
			ch.checkCookie(q, resp, st, "element")
		}
		ch.checkPart(q, resp, st)
		if resp.StatusCode == http.StatusOK {
			ch.noteHeld(q, []origin.Stamp{st}, start, end)
		}
		ch.checkStamp(q, resp, st, start, end)
		ch.remember(q, resp, &st, nil)
	case resp.StatusCode == http.StatusOK && q.Kind != "list":
		ch.Violate("garbled", "%s: 200 without a stamp: %.80q", q, body)
	}
}

// checkCookie holds st, an element q's answer resp holds (what names it),
// to the cookie its bulk answer set (origin.Stamp.Cookie,
// bulk-set-cookie): such an answer is private to the request whose call
// it was, which must get the cookie with it, as from the upstream
// directly (NGINX and Varnish relay a fetched answer's Set-Cookie to the
// client whose request fetched it). Whose address it was made for is the
// identity check's.
func (ch *Checker) checkCookie(q *traffic.Request, resp *http.Response, st origin.Stamp, what string) {
	if !st.Cookie {
		return
	}
	ch.Count("bulk-set-cookie", 1)
	want := "minted=" + st.By["addr"] + "; Path=/"
	if !slices.Contains(resp.Header.Values("Set-Cookie"), want) {
		ch.Violate("bulk-set-cookie", "%s: %s from a bulk answer that set %q, answered without it: Set-Cookie %q (%s)", q, what, want, resp.Header.Values("Set-Cookie"), resp.Header.Get("Cache-Status"))
	}
}

func (ch *Checker) checkStamp(q *traffic.Request, resp *http.Response, st origin.Stamp, start, end time.Time) {
	ch.checkStampAs(q, resp, st, start, end, "")
}

// checkStampAs checks the stamp of the answer q's client keeps: a 200's,
// or the copy a 304 confirmed (pre says which, in messages).
func (ch *Checker) checkStampAs(q *traffic.Request, resp *http.Response, st origin.Stamp, start, end time.Time, pre string) {
	cs := pre + resp.Header.Get("Cache-Status")
	if strings.Contains(cs, "stale-if-error") {
		// Shows the stale-if-error copies reached the identity checks.
		// Under the lock (Count): answers are checked concurrently.
		ch.Count("stale-if-error-"+q.Route, 1)
		if len(st.By) > 0 {
			ch.Count("stale-if-error-varied", 1)
		}
	}
	if len(st.Un) > 0 {
		// Shows answers made for a value of a header the route learned
		// but the answer does not name in Vary reached the identity
		// checks, and how many of them from a store (a hit: only a
		// client that sent the same value may get one, the identity
		// check below).
		ch.Count("learned-unvaried", 1)
		if strings.Contains(cs, "sidecache; hit") {
			ch.Count("learned-unvaried-hit", 1)
		}
	}
	if st.Res != q.Res {
		ch.Violate("resource", "%s: answer for %s, want %s (%s)", q, st.Res, q.Res, cs)
	}
	for _, k := range sortedDims(st.By) {
		if v := st.By[k]; v != q.Sent[k] {
			ch.Violate("identity", "%s: answer for %s=%.40q, this request sent %.40q (%s)", q, k, v, q.Sent[k], cs)
		}
	}
	// Only a client's id is a leak: on the cached path the sidecar sends
	// its own (issue 20 item 7b), which every request may see echoed.
	// A copy a 304 keeps echoes the id of the request that fetched it,
	// checked when that request's answer was.
	if strings.HasPrefix(st.Rid, "rid-") && st.Rid != q.Rid && pre == "" {
		ch.Violate("unkeyed", "%s: answer echoes X-Request-Id %q of another request (%s)", q, st.Rid, cs)
	}
	// key.Host shares one entry between every spelling of the host, so
	// the upstream may only have seen the canonical one — unless the
	// request bypassed the cache, whose answer is its own and never stored.
	own := q.Host == "" || st.Fh == q.Host && strings.Contains(cs, "fwd=bypass")
	if q.Route == "h" && st.Fh != strings.ToLower(ch.cfg.Host) && !own {
		ch.Violate("unkeyed", "%s: answer shaped by X-Forwarded-Host %q, want the keyed %q (%s)", q, st.Fh, ch.cfg.Host, cs)
	}
	if q.Kind != "write" {
		switch q.Route {
		case "r":
			if !sameParams(st.Q, q.Query) {
				ch.Violate("query", "%s: origin answered for ?%s (%s)", q, st.Q, cs)
			}
		case "p":
			if !subParams(st.Q, q.Query) {
				ch.Violate("query", "%s: origin answered for ?%s (%s)", q, st.Q, cs)
			}
		}
	}
	applied := q.Kind == "write" && origin.AppliedAnswer(q.Query, resp.StatusCode) // write-applied-other
	if (resp.StatusCode < 200 || resp.StatusCode > 299) && resp.StatusCode != http.StatusNotModified && !applied {
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if resp.StatusCode == http.StatusNotModified {
		ch.checked["304-kept"]++
	}
	if q.Kind == "write" {
		path := q.Path
		if q.Query != "" {
			path += "?" + q.Query // answer=303: write-applied-other
		}
		if q.Override != "" {
			// Its method spelt otherwise on the wire (write-method-override).
			path += " (method as " + q.Override + ")"
			ch.checked["write-method-override"]++
		}
		ch.ackLocked(st.Res, ack{path: path, ver: st.Ver, at: end, replica: q.Replica})
		switch {
		case applied:
			ch.checked["write-applied-other"]++ // acknowledged, held to own-write and max-lag
		case strings.Contains(q.Path, "%") || strings.Contains(q.Path, "-") || strings.ContainsAny(q.Path[strings.LastIndexByte(q.Path, '/')+1:], "_xXoObB"):
			ch.checked["write-spelled-id"]++
		}
		return
	}
	if strings.HasSuffix(q.Path, "/summary") {
		ch.checked["route-tagged-read"]++
	}
	ch.versionLocked(q, st, start, cs)
}

// versionLocked holds st, an answer q's client keeps (sent at start, its
// Cache-Status cs), to the writes acknowledged before q was sent: not
// older than one through q's replica (own-write), nor than one through
// any more than max_lag (plus margin) before (max-lag). ch.mu is held.
func (ch *Checker) versionLocked(q *traffic.Request, st origin.Stamp, start time.Time, cs string) {
	for _, a := range ch.acks[st.Res] {
		if !a.at.Before(start) || (strings.HasPrefix(a.path, "purge?key=") || strings.HasPrefix(a.path, "purge?route=")) && strings.HasSuffix(q.Path, "/summary") {
			// A purge by key drops that key, and one by route that
			// route's entries, not /r/{id}/summary: route r-summary's
			// (route-tagged-read). A purge by tag or of all drops it.
			continue
		}
		lag := !a.ownOnly && start.Sub(a.at) > ch.cfg.MaxLag+ch.cfg.LagMargin
		switch {
		case a.replica == q.Replica:
			ch.checked["own"]++
		case lag:
			ch.checked["lag"]++
		}
		if st.Ver >= a.ver {
			continue
		}
		if a.replica == q.Replica {
			ch.violations = append(ch.violations, Violation{Kind: "own-write", Msg: fmt.Sprintf(
				"%s: version %d, but v%d (PATCH %s) was acknowledged through this replica %v before it was sent (%s)", q, st.Ver, a.ver, a.path, start.Sub(a.at).Round(time.Millisecond), cs)})
			return
		}
		if lag {
			ch.violations = append(ch.violations, Violation{Kind: "max-lag", Msg: fmt.Sprintf(
				"%s: version %d, but v%d (PATCH %s) was acknowledged %v before it was sent (max_lag %v) (%s)", q, st.Ver, a.ver, a.path, start.Sub(a.at).Round(time.Millisecond), ch.cfg.MaxLag, cs)})
			return
		}
	}
}

// params groups a raw query's values by name, in order, each kept as
// sent (no unescaping: q=%zz and q=%25zz differ, as they do to the origin).
func params(raw string) map[string][]string {
	m := map[string][]string{}
	if raw == "" {
		return m
	}
	for _, p := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(p, "=")
		m[k] = append(m[k], v)
	}
	return m
}

// sameParams: the origin saw the request's parameters, maybe in another
// order of names, never of one name's values (RFC 3986 §6.2.2).
func sameParams(got, sent string) bool {
	g, s := params(got), params(sent)
	if len(g) != len(s) {
		return false
	}
	for k, v := range s {
		if !slices.Equal(g[k], v) {
			return false
		}
	}
	return true
}

// subParams: every parameter the origin saw is one the request sent, with
// the same values (a route keyed on some parameters may drop the others).
func subParams(got, sent string) bool {
	s := params(sent)
	for k, v := range params(got) {
		if !slices.Equal(s[k], v) {
			return false
		}
	}
	return true
}

// canonIDs are ids as the origin reads them (05 is 5); an id it cannot
// read stays as it is.
func canonIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		if n, err := strconv.ParseUint(id, 10, 64); err == nil {
			out[i] = strconv.FormatUint(n, 10)
		}
	}
	return out
}

// checkAsAsked (list-as-asked): a list of good ids answered 200 is the
// origin's own answer to it, one element per id asked, in order (the
// origin lists a repeated id each time), whether the sidecar assembled it
// per id or passed it through.
func (ch *Checker) checkAsAsked(q *traffic.Request, resp *http.Response, sts []origin.Stamp, asked []string) {
	if !goodIDs(q.Ids) {
		return
	}
	got := make([]string, len(sts))
	for i, st := range sts {
		got[i] = st.ID
	}
	if !slices.Equal(got, asked) {
		ch.Violate("list-as-asked", "%s: answered elements %v, the origin's own answer lists %v (%s)", q, got, asked, resp.Header.Get("Cache-Status"))
	}
}

// PassesThrough: a list the sidecar passes through whole, the origin's
// own answer, storing nothing: one that names an id twice, or spells one
// otherwise than it stores it (list-as-asked).
func PassesThrough(ids []string) bool {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] || len(id) > 1 && id[0] == '0' {
			return true
		}
		seen[id] = true
	}
	return false
}

// goodIDs: every id of a list is one the origin's bulk endpoint parses.
func goodIDs(ids []string) bool {
	for _, id := range ids {
		if !origin.GoodID("/" + id) {
			return false
		}
	}
	return len(ids) > 0
}

// checkHead checks a HEAD answer by the stamp its header carries: no body
// to read, the same identity, resource and version invariants.
func (ch *Checker) checkHead(q *traffic.Request, resp *http.Response, start, end time.Time) {
	sh := resp.Header.Get(origin.StampHeader)
	if sh == "" {
		if resp.StatusCode == http.StatusOK {
			ch.Violate("garbled", "%s: HEAD 200 without a stamp (%s)", q, resp.Header.Get("Cache-Status"))
		}
		return
	}
	var st origin.Stamp
	if err := json.Unmarshal([]byte(sh), &st); err != nil || st.Res == "" {
		ch.Violate("garbled", "%s: HEAD stamp %.80q", q, sh)
		return
	}
	ch.checkStamp(q, resp, st, start, end)
}

// sortedDims is for stable messages.
func sortedDims(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
