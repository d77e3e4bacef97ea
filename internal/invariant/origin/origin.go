// Package origin is the invariant harness's scripted upstream: an
// httptest server that stamps every answer with what it answered for and
// for whom (Stamp), answers each resource by a Profile the runner redraws
// every round (Vary sets, private, Set-Cookie, sizes, gzip, delays, 5xx,
// hang-ups, validators, trailers), and serves the bulk endpoints the
// batch routes merge into. It counts its calls and resends so the runner
// can hold rounds to their budgets. It imports nothing of the harness:
// the clients (traffic) and the checks (check) read its wire format (Stamp, StampHeader,
// the trailer names, Resource, AcceptsGzip) from here.
package origin

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stamp is what every origin answer says about itself, as its JSON body:
// which resource and version it answered for, and the value of every
// identity dimension (By) it depends on, as the origin saw it. The checks
// compare a stamp with what the client that received it sent.
type Stamp struct {
	ID  string            `json:"id,omitempty"` // the batch route's id_field
	Res string            `json:"res"`
	Ver int               `json:"ver"`
	By  map[string]string `json:"by,omitempty"`
	// Q is the raw query the origin received; Rid the X-Request-Id it
	// echoed (request-id feature).
	Q   string `json:"q,omitempty"`
	Rid string `json:"rid,omitempty"`
	// Fh is the X-Forwarded-Host the origin saw (host-spelling).
	Fh string `json:"fh,omitempty"`
	// Un are the dimensions of By the answer read without naming them in
	// Vary (Dim How "unvaried", learned-unvaried), for the report's counts.
	Un []string `json:"un,omitempty"`
	// Tag is a bulk element's own validator (batch.etag_field route /e).
	Tag any    `json:"etag,omitempty"`
	Pad string `json:"pad,omitempty"`
	// Part: an element of a 206 bulk answer (bulk-206), which no client
	// may ever receive as an element.
	Part bool `json:"part,omitempty"`
	// Cookie: an element of a bulk answer that set a cookie minted for
	// By["addr"] (bulk-set-cookie): whoever receives it must receive
	// that cookie too.
	Cookie bool `json:"ck,omitempty"`
}

// StampHeader carries the stamp of a read's answer (without the padding)
// next to its body.
const StampHeader = "X-Stamp"

// Dim is one identity dimension an answer depends on, and how the origin
// declares that dependency (How): "vary" (Vary names the header),
// "private" (Cache-Control: private), "private-stray" (the same spelt
// with other separators: StrayPrivate), "targeted-nostore" (a
// Surrogate-Control or CDN-Cache-Control naming no-store beside a
// Cache-Control that would store: TargetedNoStore), "set-cookie" (a Set-Cookie minted
// for the value), "set-cookie2" (the same as an obsolete Set-Cookie2,
// RFC 2965), "none" (the sidecar's own rule must keep it: a
// credentialed request bypasses the cache, a keyed header is in the key)
// or "unvaried": the answer reads the header when the request carries
// one and says so nowhere, while other resources of the route name it in
// Vary (the route learns it and forwards it everywhere). An answer made
// without the header is the default one, for everyone (its stamp has no
// value for the dimension, so any client may get it); one made for a
// value is that value's alone, and a cache may not store it under a key
// that does not hold it.
type Dim struct {
	Name string // addr, cookie, auth, tenant, lang, ua
	How  string
	// Spelling picks, for How "private-stray", the Cache-Control of
	// StrayPrivate the answer says private with; for "targeted-nostore",
	// the fields of TargetedNoStore.
	Spelling int
}

// StrayPrivate are Cache-Control values that keep an answer private or
// unstored with other separators than commas (How "private-stray", the
// private-stray row): NGINX and Varnish read them as private, and so must
// the sidecar.
var StrayPrivate = []string{"private; max-age=0", "max-age=60 private", "public;no-store", "no-cache; no-store", "max-age=60;private"}

// TargetedNoStore are the targeted fields (RFC 9213's CDN-Cache-Control,
// the Edge Architecture's Surrogate-Control) an answer of How
// "targeted-nostore" carries, beside a Cache-Control: max-age=60 that
// alone would let a cache store it (the targeted-nostore row): each names
// no-store, in a spelling the Cache-Control parser accepts, so the answer
// must never be stored nor shared, whether or not the cache obeys the
// field's other directives. The last one's CDN-Cache-Control, first in
// precedence, would store it on a freshness: origin route.
var TargetedNoStore = [][]string{
	{"Surrogate-Control", "no-store"},
	{"CDN-Cache-Control", "no-store"},
	{"Surrogate-Control", "max-age=60;no-store"},
	{"CDN-Cache-Control", "max-age=60 no-store"},
	{"Surrogate-Control", "no-store;edge1"},
	{"CDN-Cache-Control", "max-age=60", "Surrogate-Control", "no-store"},
}

// setTargetedNoStore writes the fields of TargetedNoStore's spelling i.
func setTargetedNoStore(h http.Header, i int) {
	h.Set("Cache-Control", "max-age=60")
	kv := TargetedNoStore[i%len(TargetedNoStore)]
	for j := 0; j+1 < len(kv); j += 2 {
		h.Set(kv[j], kv[j+1])
	}
}

// dimHeader is the request header the origin reads a dimension from.
var dimHeader = map[string]string{
	"addr":   "X-Forwarded-For",
	"cookie": "Cookie",
	"auth":   "Authorization",
	"tenant": "X-Tenant",
	"lang":   "Accept-Language",
	"ua":     "User-Agent", // vary-user-agent: "" when none came
}

// SecretHeader is the field the withheld-field row's answers name in a
// qualified private or no-cache, holding the caller's address.
const SecretHeader = "X-Secret"

// Origin is the scripted service behind the replicas. Resources are
// "<kind>/<id>" after the origin's own, Express-like normalisation (case
// folded, dot segments and empty segments dropped, trailing slash and
// ";params" ignored, a numeric id's leading zeros dropped); PATCH bumps a
// resource's version. Bulk: GET /u?ids=1,2 answers a JSON array of stamps.
type Origin struct {
	*httptest.Server
	Calls  atomic.Int64 // every request received
	Writes atomic.Int64 // every PATCH received
	// Resends counts the calls that repeat an earlier call's
	// X-Request-Id (one per upstream request: the sidecar's own, or the
	// client's on pass-through): the same request sent once more after
	// the origin hung up on a reused connection (RFC 9112 §9.3.1).
	Resends atomic.Int64
	Stalls  atomic.Int64 // bodies stalled (Profile.Stall)
	// trickled is the version each trickled write (TrickleHeader) bumped
	// its resource to.
	trickled map[string]Trickled
	// active counts the calls being served; lastCall is when the last one
	// began or ended (UnixNano), for Settle.
	active, lastCall atomic.Int64

	mu       sync.Mutex
	ver      map[string]int
	lm       map[string]time.Time // res → Last-Modified of its current version
	born     time.Time            // Last-Modified of every version 0
	profiles map[string]Profile
	rng      *rand.Rand
	sent     map[string]int // X-Request-Id → calls, this round
	overSent []string       // ids sent more than MaxSends times
	// crowd counts the bulk calls of each crowd round (CrowdRound),
	// resends apart, whenever they arrive: a crowd round's last calls may
	// reach the origin after its last answer, during the next round.
	crowd map[int]int64
	// queueBad counts the /q calls (resends included) holding each
	// crowd bad id (CrowdBadID): a failed call's retries must hold its
	// ids once, not once per list (list-crowd-retry, retry.go).
	queueBad map[string]int
	// CrowdCalls counts them all, so a round's own calls are what it
	// received less the crowd rounds' (see the runner's play).
	CrowdCalls atomic.Int64
	// Partials counts the bulk calls answered 206 (bulk-206).
	Partials atomic.Int64
	// Nulls counts the null elements bulk answers held (bulk-null).
	Nulls atomic.Int64
	// UserBulk counts the calls of the /u bulk endpoint being served,
	// and UserBulkHigh the most at once since the runner last set it
	// (batch-hosts).
	UserBulk, UserBulkHigh atomic.Int64
	// Continues counts the 100 Continue the origin sent of its own
	// (Profile.Continue).
	Continues atomic.Int64
	// crng draws Profile.Continue's 100s, apart from rng, so that the
	// row moves none of the origin's other draws.
	crng *rand.Rand
	// QueueCalls counts the bulk calls of /q (route q: max_size 2,
	// max_in_flight 1), resends included: the queue rounds start their
	// second wave once each replica's first call came (list-crowd-queue).
	QueueCalls atomic.Int64
	// QueueBusy counts the /q calls being served, and QueueHigh the most
	// at once since the last HoldQueue; queueGate, while set, holds every
	// /q call until it is closed (the batch-reload row, batchreload.go).
	QueueBusy, QueueHigh atomic.Int64
	queueGate            chan struct{}
	// writeHolds: the writes held before they are applied, by resource
	// (HoldWrite; the batch-reload row's write stage).
	writeHolds map[string]*writeHold
	// trailCalls numbers the answers sent with trailers (X-Trail-Call).
	trailCalls int64
	// hops lists the calls that carried ClientHop, this round.
	hops []string
	// underscored lists the calls that carried an Underscored field.
	underscored []string
	// expects lists the calls that carried an Expect (TakeExpects).
	expects []string
	// cased lists the calls whose method held a lower-case letter
	// (TakeMethodCases, override.go).
	cased []string
	// reading: the channels WatchRead handed out, by resource (behind.go).
	reading map[string]chan struct{}
	// tunnels and tunnelFaults: the upgrade row's (upgrade.go).
	tunnels      map[string]*tunnelState
	tunnelFaults []string
	// mismatches: the calls to each of the mismatch-vary row's
	// resources (mismatch.go).
	mismatches map[string][]string
	// stalled: the stalled-length row's answers being held, by path
	// (stalled.go).
	stalled map[string]*stalledCall
}

// ClientHop is the field a client's Connection names (the harness's
// connection-hop draw): hop-by-hop (RFC 9110 §7.6.1), so no call the
// sidecar makes may carry it.
const ClientHop = "X-Client-Hop"

// TakeHops returns the calls received since the last TakeHops that
// carried ClientHop.
func (o *Origin) TakeHops() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	hops := o.hops
	o.hops = nil
	return hops
}

// TakeExpects returns the calls received since the last TakeExpects that
// carried an Expect: the sidecar answers a client's 100-continue itself,
// as NGINX does, so none may reach the origin (expect, expect-read).
func (o *Origin) TakeExpects() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.expects
	o.expects = nil
	return e
}

// Underscored is the first field of h whose name holds '_' and reads, '_'
// as '-', as X-Forwarded-*, X-Real-Ip or X-Tenant: a CGI-style upstream
// would take it for that field (the underscore-forwarding draw); "" when
// none.
func Underscored(h http.Header) string {
	for k := range h {
		if !strings.Contains(k, "_") {
			continue
		}
		n := strings.ToLower(strings.ReplaceAll(k, "_", "-"))
		if strings.HasPrefix(n, "x-forwarded-") || n == "x-real-ip" || n == "x-tenant" {
			return k
		}
	}
	return ""
}

// ForgedAddress is the first client-address claim of h that carries the
// address the clients forge (ForgedAddr): X-Real-Ip, which the sidecar
// writes from its peer, or True-Client-Ip and the like, which it drops
// (the underscore-forwarding draw); "" when none.
func ForgedAddress(h http.Header) string {
	for _, k := range [...]string{"X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "X-Cluster-Client-Ip", "Cf-Connecting-Ip", "Fastly-Client-Ip", "Client-Ip", "X-Originating-Ip", "X-Forwarded-Port"} {
		for _, v := range h[k] {
			if strings.Contains(v, ForgedAddr) {
				return k
			}
		}
	}
	return ""
}

// TakeUnderscored returns the calls received since the last
// TakeUnderscored that carried an Underscored field.
func (o *Origin) TakeUnderscored() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	u := o.underscored
	o.underscored = nil
	return u
}

// MaxSends is the most calls one upstream request (one X-Request-Id) may
// make: its own and one resend.
const MaxSends = 2

// NewOrigin starts the origin; the caller closes it.
func NewOrigin(seed uint64) *Origin {
	o := &Origin{ver: map[string]int{}, lm: map[string]time.Time{}, born: time.Now().Truncate(time.Second).Add(-time.Hour), profiles: map[string]Profile{}, sent: map[string]int{}, trickled: map[string]Trickled{}, crowd: map[int]int64{}, queueBad: map[string]int{}, rng: rand.New(rand.NewPCG(seed, 7)), crng: rand.New(rand.NewPCG(seed, 9))}
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	return o
}

// SetProfile sets how res is answered from now on.
func (o *Origin) SetProfile(res string, p Profile) {
	o.mu.Lock()
	o.profiles[res] = p
	o.mu.Unlock()
}

func (o *Origin) serve(w http.ResponseWriter, r *http.Request) {
	o.Calls.Add(1)
	o.active.Add(1)
	o.lastCall.Store(time.Now().UnixNano())
	defer func() {
		o.lastCall.Store(time.Now().UnixNano())
		o.active.Add(-1)
	}()
	if v := r.Header.Values(ClientHop); len(v) > 0 {
		o.mu.Lock()
		o.hops = append(o.hops, r.Method+" "+r.URL.RequestURI())
		o.mu.Unlock()
	}
	o.noteMethodCase(r) // override.go
	if v := r.Header.Values("Expect"); len(v) > 0 {
		o.mu.Lock()
		o.expects = append(o.expects, fmt.Sprintf("%s %s (Expect %q)", r.Method, r.URL.RequestURI(), v))
		o.mu.Unlock()
	}
	if k := cmp.Or(Underscored(r.Header), ForgedAddress(r.Header)); k != "" {
		o.mu.Lock()
		o.underscored = append(o.underscored, r.Method+" "+r.URL.RequestURI()+" ("+k+")")
		o.mu.Unlock()
	}
	resent := false
	if id := r.Header.Get("X-Request-Id"); id != "" {
		o.mu.Lock()
		o.sent[id]++
		if n := o.sent[id]; n > 1 {
			resent = true
			o.Resends.Add(1)
			if n == MaxSends+1 {
				o.overSent = append(o.overSent, r.Method+" "+r.URL.RequestURI()+" X-Request-Id "+id)
			}
		}
		o.mu.Unlock()
	}
	if (r.URL.Path == "/u" || r.URL.Path == "/q") && !resent {
		o.countCrowd(r.URL.Query().Get("ids"))
	}
	if r.URL.Path == "/q" {
		o.QueueCalls.Add(1)
		o.countQueueBad(r.URL.Query().Get("ids"))
	}
	patch := AppliedMethod(r) == http.MethodPatch // override.go
	if patch {
		o.Writes.Add(1)
	}
	if o.tunnel(w, r) { // the upgrade row (upgrade.go)
		return
	}
	if patch && (r.URL.Path == "/u" || r.URL.Path == "/e") {
		o.writeList(w, r) // bulk.go
		return
	}
	if r.URL.Path == "/u" || r.URL.Path == "/e" || r.URL.Path == "/s" || r.URL.Path == "/q" {
		o.bulk(w, r)
		return
	}
	if o.stall(w, r) { // the stalled-length row (stalled.go)
		return
	}
	if o.mismatch(w, r) { // the mismatch-vary row (mismatch.go)
		return
	}
	res := Resource(r.URL.EscapedPath())
	if res == "" || strings.HasPrefix(res, "u/") && AbsentPath(res) {
		// An absent id (bulk-null) has no record either.
		http.Error(w, "no such resource", http.StatusNotFound)
		return
	}
	if patch {
		o.write(w, r, res)
		return
	}
	o.mu.Lock()
	p := o.profiles[res]
	ver := o.ver[res]
	lm := o.lastMod(res)
	roll := o.rng.IntN(100)
	lie := p.Lie > 0 && o.rng.IntN(100) < p.Lie && !conditional(r)
	o.readLocked(res)
	o.mu.Unlock()
	tr := o.drawTrailing(r, p.Trailers, url.Values{"res": {res}})
	if p.Delay > 0 {
		time.Sleep(p.Delay)
	}
	o.sendContinue(w, p.Continue)
	switch {
	case roll < p.Hang:
		hangUp(w)
		return
	case roll < p.Hang+p.Fail:
		w.Header().Set("Content-Type", "text/plain")
		tr.header(w.Header())
		w.WriteHeader(500 + 3*(roll%2))
		fmt.Fprint(w, "origin failure")
		tr.send(w)
		return
	}
	for range p.Hints {
		w.Header().Set("Link", "</r.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
	}
	clear(w.Header())
	trunc := roll >= p.Hang+p.Fail && roll < p.Hang+p.Fail+p.Trunc
	// Only pass-throughs stall (a credential reaches the origin on no
	// other path): a cached fill's stall holds its lease and the calls
	// queued behind it past the round, which the budget would count in
	// the next one.
	stall := roll >= p.Hang+p.Fail+p.Trunc && roll < p.Hang+p.Fail+p.Trunc+p.Stall &&
		(r.Header.Get("Cookie") != "" || r.Header.Get("Authorization") != "")
	st := Stamp{Res: res, Ver: ver, By: map[string]string{}, Q: r.URL.RawQuery}
	if r.Header.Get("X-Request-Id") != "" {
		st.Rid = r.Header.Get("X-Request-Id")
	}
	st.Fh = r.Header.Get("X-Forwarded-Host")
	h := w.Header()
	h.Set("Content-Type", "application/json")
	var vary []string
	for _, d := range p.Dims {
		v := dimValue(r, d.Name)
		switch {
		case d.How != "unvaried":
			st.By[d.Name] = v
		case v != "":
			st.By[d.Name] = v
			st.Un = append(st.Un, d.Name)
		}
		switch d.How {
		case "vary":
			vary = append(vary, dimHeader[d.Name])
		case "private":
			h.Set("Cache-Control", "private")
		case "private-stray":
			h.Set("Cache-Control", StrayPrivate[d.Spelling%len(StrayPrivate)])
		case "targeted-nostore":
			setTargetedNoStore(h, d.Spelling)
		case "set-cookie":
			h.Add("Set-Cookie", "minted="+v+"; Path=/")
		case "set-cookie2":
			h.Add("Set-Cookie2", `minted="`+v+`"; Version="1"`)
		}
	}
	if p.StaleAtOnce && h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "max-age=0")
	}
	if p.Withhold != "" {
		cc := p.Withhold
		if h.Get("Cache-Control") == "private" {
			cc = "private, " + cc
		}
		h.Set("Cache-Control", cc)
		h.Set(SecretHeader, dimValue(r, "addr"))
	}
	gz := p.Gzip && AcceptsGzip(r.Header.Values("Accept-Encoding"))
	if p.Gzip {
		vary = append(vary, "Accept-Encoding")
	}
	switch {
	case len(vary) > 0 && p.VarySep != "" && len(vary) == 1:
		h.Set("Vary", vary[0]+p.VarySep)
	case len(vary) > 0 && p.VarySep != "":
		h.Set("Vary", strings.Join(vary, p.VarySep))
	case len(vary) > 0:
		h.Set("Vary", strings.Join(vary, ", "))
	}
	body := encodeStamp(st, p.Size)
	if lie {
		o.lie(w, roll%2 == 0, body)
		return
	}
	if p.LastMod && !lm.After(time.Now().Truncate(time.Second)) {
		h.Set("Last-Modified", lm.UTC().Format(http.TimeFormat))
	}
	inm := r.Header.Values("If-None-Match")
	if p.ETag {
		// One tag per version, variant (the stamp) and the fields a 304
		// must repeat (Vary, Cache-Control): the same tag always came
		// with the same ones, so the checks can tell what a 304 lacks.
		tagged := body
		if p.NotModifiedCoding {
			// The stamp's Rid is each call's own X-Request-Id, so no
			// two calls' tags match and the sidecar's conditionals are
			// never answered 304: here one tag names the version and
			// variant, whichever call fetched it (304-coding).
			bare := st
			bare.Rid = ""
			tagged = encodeStamp(bare, 0)
		}
		tag := fmt.Sprintf(`"v%d-%x"`, ver, fnv(append(tagged, h.Get("Vary")+"|"+h.Get("Cache-Control")...)))
		if p.WeakETag {
			tag = "W/" + tag
		}
		h.Set("ETag", tag)
		if len(inm) > 0 && MatchWeak(inm, tag) {
			notModifiedCoding(h, r, p)
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && len(inm) == 0 && h.Get("Last-Modified") != "" && !lm.After(ims) {
		// RFC 9110 §13.1.3: only without If-None-Match (§13.2.2).
		notModifiedCoding(h, r, p)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	// The stamp again as a header, so an answer without a body (HEAD,
	// served from a GET entry) is checked like one with it.
	sh, _ := json.Marshal(st)
	h.Set(StampHeader, string(sh))
	if gz && len(body) >= p.GzipFrom {
		body = gzipBytes(body)
		h.Set("Content-Encoding", "gzip")
		if p.CodingLines {
			h["Content-Encoding"] = []string{[...]string{"", "identity"}[roll%2], "gzip"}
		}
	}
	if rg := r.Header.Get("Range"); rg != "" && len(h.Values("Content-Encoding")) == 0 {
		if from, to, ok := oneRange(rg, len(body)); ok {
			// A part is not the resource: a cache that stored it as the
			// whole would hand other clients a body without a stamp.
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(body)))
			if tr == nil {
				h.Set("Content-Length", strconv.Itoa(to-from+1))
			}
			tr.header(h)
			w.WriteHeader(http.StatusPartialContent)
			w.Write(body[from : to+1])
			tr.send(w)
			return
		}
	}
	if trunc || stall {
		// No Content-Length: chunked, and the last chunk never comes.
		w.Write(body[:len(body)/2])
		http.NewResponseController(w).Flush()
		if stall {
			o.Stalls.Add(1)
			// Nothing more, until the sidecar gives up on it.
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		}
		panic(http.ErrAbortHandler)
	}
	if tr == nil {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	tr.header(h)
	w.Write(body)
	tr.send(w)
}

// notModifiedCoding adds to h, a 304's header, the Content-Encoding of the
// 304-coding row: gzip, to a request that accepts it (so a 304 relayed to
// its own client says nothing that client refused).
func notModifiedCoding(h http.Header, r *http.Request, p Profile) {
	if p.NotModifiedCoding && AcceptsGzip(r.Header.Values("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
	}
}

// write bumps res's version. Its profile's Fail and Hang apply after the
// bump: the write happened, but the client is not told so.
func (o *Origin) write(w http.ResponseWriter, r *http.Request, res string) {
	if id := r.Header.Get(TrickleHeader); id != "" {
		o.trickle(w, r, res, id)
		return
	}
	if !o.heldWrite(r, res) {
		return
	}
	if kind := r.Header.Get(DeafHeader); kind != "" {
		o.deaf(w, r, kind)
		return
	}
	o.mu.Lock()
	if p := o.profiles[res]; p.Refuse > 0 && o.rng.IntN(100) < p.Refuse {
		o.mu.Unlock()
		http.Error(w, "refused", pickCode(res))
		return
	}
	o.ver[res]++
	ver := o.ver[res]
	// Last-Modified is the write's time rounded up to the next second,
	// and is sent only once the origin's Date has reached it (RFC 9110
	// §8.8.2.1: never later than Date): so a Last-Modified names the
	// version current at that second, and every Date or Last-Modified a
	// client holds of an older version is earlier than it. The origin's
	// own validators are honest; a 304 that keeps a stale copy is the
	// sidecar's doing.
	o.lm[res] = time.Now().Truncate(time.Second).Add(time.Second)
	p := o.profiles[res]
	roll := o.rng.IntN(100)
	o.mu.Unlock()
	tr := o.drawTrailing(r, p.Trailers, url.Values{"res": {res}})
	if !p.WriteFaults {
		roll = 100
	}
	o.sendContinue(w, p.Continue)
	if fault(w, roll, p.Hang, p.Fail, http.StatusInternalServerError, "write failed") {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	tr.header(w.Header())
	// Applied, and answered otherwise (write-applied-other): 303 See
	// Other to the resource (Post/Redirect/Get), or a gateway's 502/504.
	switch code, _ := strconv.Atoi(r.URL.Query().Get("answer")); code {
	case http.StatusSeeOther, http.StatusBadGateway, http.StatusGatewayTimeout:
		if code == http.StatusSeeOther {
			w.Header().Set("Location", "/"+res)
		}
		w.WriteHeader(code)
	}
	json.NewEncoder(w).Encode(Stamp{Res: res, Ver: ver})
	tr.send(w)
}

// sendContinue sends, on pct percent of the calls, one 100 Continue of
// the origin's own before its answer, and on a third of those two: the
// 100 answers the sidecar's request, never its client's (relay.Guard,
// relay.Interim), so at most one (net/http's own, when the client asked)
// may reach a client.
func (o *Origin) sendContinue(w http.ResponseWriter, pct int) {
	if pct <= 0 {
		return
	}
	o.mu.Lock()
	roll := o.crng.IntN(300)
	o.mu.Unlock()
	n := 0
	switch {
	case roll < pct:
		n = 2
	case roll < 3*pct:
		n = 1
	}
	for range n {
		w.WriteHeader(http.StatusContinue)
		o.Continues.Add(1)
	}
}

// lastMod is res's Last-Modified; o.mu held.
func (o *Origin) lastMod(res string) time.Time {
	if t, ok := o.lm[res]; ok {
		return t
	}
	return o.born
}
