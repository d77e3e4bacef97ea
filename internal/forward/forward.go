// Package forward decides which request headers reach the upstream on a
// route's cached path, and which requests may share one bulk call.
//
// What the upstream sees shapes an answer that is then stored for
// everyone, so by default only what the key holds is forwarded: the
// headers named in key.headers, the normalised Accept-Encoding and the
// headers the route's answers were seen to Vary on (RFC 9111 §4.1); the
// proxy then adds what it writes itself (Own: X-Forwarded-*, its request id
// and trace context), never the client's copy of those. Anything else a client sends (X-Original-URL,
// X-HTTP-Method-Override, a tenant header the operator forgot to key)
// cannot poison the shared answer. A route with forward_headers: all
// forwards everything, as a plain reverse proxy does.
//
// It exists apart from the proxy because these rules are a policy about
// header names, with bounded per-route state (learned names, withheld
// names logged once), that reads and tests alone; the proxy holds one
// Rules per route and builds the upstream request around it.
package forward

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/clientaddr"
)

// Config describes one route's forwarding.
type Config struct {
	Route string   // the route's name, for the log
	All   bool     // forward_headers: all
	Keyed []string // canonical key.headers
	// Never reports the (canonical) headers that never reach the upstream
	// whatever the route says: hop-by-hop and conditional fields, Expect,
	// the client's Forwarded and X-Forwarded-* (the proxy sets its own). nil:
	// none.
	Never func(name string) bool
	Log   *slog.Logger // nil: slog.Default()
	// Logged remembers the withheld headers already logged; share one
	// across reloads so each is logged once per process, not once per
	// reload. nil: the Rules keep their own.
	Logged *Logged
}

// Logged is the set of (route, header) pairs whose withholding has been
// logged, bounded per route and in routes.
type Logged struct {
	mu     sync.Mutex
	routes map[string]map[string]bool
}

// NewLogged returns an empty set.
func NewLogged() *Logged { return &Logged{routes: map[string]map[string]bool{}} }

// maxLoggedRoutes bounds the routes a Logged remembers (reloads may rename
// routes any number of times).
const maxLoggedRoutes = 1024

// first reports whether (route, name) is new, and remembers it while the
// bounds allow; past them nothing more is logged.
func (l *Logged) first(route, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.routes[route]
	if names == nil {
		if len(l.routes) >= maxLoggedRoutes {
			return false
		}
		names = map[string]bool{}
		l.routes[route] = names
	}
	if names[name] || len(names) >= maxLogged {
		return false
	}
	names[name] = true
	return true
}

// Rules are one route's forwarding rules. They are safe for concurrent
// use; the headers learned from Vary and the withheld headers logged are
// bounded per route, whatever the upstream and clients send.
type Rules struct {
	route string
	all   bool
	keyed []string
	never func(string) bool
	// learned are Vary'd header names seen on the route's answers
	// (copy-on-write; at most maxLearned).
	learned atomic.Pointer[[]string]
	// grouped are, without forward_headers: all, the names of every
	// request header that may enter a batch group, sorted: the keyed ones
	// and the learned ones Group counts (replaced whenever one is
	// learned). Group then looks these few up instead of judging every
	// header the request carries; with none, the group is the host alone.
	grouped atomic.Pointer[[]string]
	// codings are the content-codings (cachekey.Codings) the route's
	// answers came in: the variants a request may be served from.
	codings atomic.Uint32
	mu      sync.Mutex
	// logged are withheld header names already logged (at most maxLogged
	// per route).
	logged *Logged
	log    *slog.Logger
}

const (
	maxLearned = 32
	maxLogged  = 64
)

// tracingHeaders identify a request; they do not shape its answer. On the
// cached path the upstream gets the sidecar's own (the fill's request id
// and span), never the client's: an answer that echoes one is stored for
// everyone, so a client's "<script>" request id must never reach it.
var tracingHeaders = [...]string{"Traceparent", "Tracestate", "X-Request-Id"}

// Own reports the (canonical) request headers the sidecar itself writes on
// the upstream request: Forwarded, X-Forwarded-*, X-Real-Ip (and the
// address claims it drops: clientaddr), Via, its request id and
// trace context. A client's copy never reaches the upstream on the cached
// path, and an answer that varies on one of them (Vary: X-Forwarded-For)
// varies on something no key can hold — the value depends on who asked,
// not on what the key names — so it is not stored (RFC 9111 §4.1 asks the
// cache to match what the request sent; here the sidecar sent it).
func Own(name string) bool {
	return name == "Forwarded" || name == "Via" || strings.HasPrefix(name, "X-Forwarded-") ||
		clientaddr.Replaced(name) || slices.Contains(tracingHeaders[:], name)
}

// VariesOnOwn reports whether names (a parsed Vary) holds a header the
// sidecar writes itself (Own).
func VariesOnOwn(names []string) bool {
	return slices.ContainsFunc(names, Own)
}

// New returns the rules c describes.
func New(c Config) *Rules {
	f := &Rules{route: c.Route, all: c.All, keyed: c.Keyed, never: c.Never, logged: c.Logged, log: c.Log}
	if f.logged == nil {
		f.logged = NewLogged()
	}
	if f.never == nil {
		f.never = func(string) bool { return false }
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	f.learned.Store(&[]string{})
	f.grouped.Store(f.groupedNames(nil))
	return f
}

// groupedNames are the sorted names Group may count on a route that
// forwards only what it keys and learned (learned, already stored: Grouped
// reads it): the names among those that Grouped reports.
func (f *Rules) groupedNames(learned []string) *[]string {
	var names []string
	for _, k := range slices.Concat(f.keyed, learned) {
		if !slices.Contains(names, k) && f.Grouped(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return &names
}

// Forwards reports whether a client's (canonical) header reaches the
// upstream. The headers the sidecar writes itself (Own) never do.
func (f *Rules) Forwards(name string) bool {
	if Own(name) {
		return false
	}
	return f.all || name == "Accept-Encoding" ||
		slices.Contains(f.keyed, name) || slices.Contains(*f.learned.Load(), name)
}

// Codings reports the content-codings the route's origin has answered in
// (NoteCoding), for cachekey.VariantCoding.
func (f *Rules) Codings() cachekey.Codings { return cachekey.Codings(f.codings.Load()) }

// NoteCoding records that the origin answered in coding (as
// cachekey.StoredCoding names it): from now on, clients that accept it
// look for that variant first. The set only grows, and holds at most
// three codings.
func (f *Rules) NoteCoding(coding string) {
	for {
		old := f.codings.Load()
		next := uint32(cachekey.Codings(old).With(coding))
		if next == old || f.codings.CompareAndSwap(old, next) {
			return
		}
	}
}

// Withheld reports whether an answer that varies on names was fetched
// without one of them although the request header h carried it: the
// upstream then answered another variant than the one the key names. A
// header h carries counts as SentWithout counts it: as it would go on the
// wire (OnWire). The sidecar's own headers are not withheld ones (see
// VariesOnOwn).
func (f *Rules) Withheld(h http.Header, names []string) bool {
	for _, n := range names {
		if OnWire(h, n) && !Own(n) && !f.Forwards(n) {
			return true
		}
	}
	return false
}

// SentWithout reports whether an answer that varies on names was fetched
// without one of them although the request header h carried it, judged by
// sent, the header the fetch actually carried upstream: what the route
// forwards now may have been learned after that fetch left, and the
// upstream answered what it was sent (RFC 9111 §4.1).
//
// Both are judged by what goes on the wire (OnWire), not by what the maps
// hold: the empty User-Agent the sidecar sets on every fetch that
// forwards none (internal/upreq) keeps Go's own off the wire and sends
// nothing, so it is not a User-Agent sent. Taken for one, an answer that
// varies on User-Agent, made for no User-Agent at all, was stored as the
// variant of the client's, and the route never learned to forward it:
// every User-Agent's variant was the origin's answer to none.
//
// The headers the sidecar writes itself (Own) are not withheld ones: no
// fetch ever sends the client's, and VariesOnOwn keeps such an answer to
// its client.
func SentWithout(h, sent http.Header, names []string) bool {
	for _, n := range names {
		if OnWire(h, n) && !Own(n) && !OnWire(sent, n) {
			return true
		}
	}
	return false
}

// SentValues are the values of the (canonical) header n that a request
// with header h puts on the wire, as net/http's Request.write (and
// internal/lean, which writes as it does) sends them; nil: none. That is
// every value h holds, but for User-Agent: only the first one goes, and
// none when it is empty (RFC 9110 §10.1.5 gives User-Agent no empty
// form; an empty one is also the sidecar's mark that no User-Agent
// goes, internal/upreq). For the record of a call (what it sent), and
// for a client's request (what its own fetch would send, were n
// forwarded): two requests whose fetches put the same values on the wire
// get the same answer from the upstream.
func SentValues(h http.Header, n string) []string {
	vs := h[n]
	switch {
	case len(vs) == 0:
		return nil
	case n == "User-Agent" && vs[0] == "":
		return nil
	case n == "User-Agent":
		return vs[:1:1]
	}
	return vs
}

// OnWire reports whether a request with header h puts the (canonical)
// header n on the wire (SentValues).
func OnWire(h http.Header, n string) bool { return SentValues(h, n) != nil }

// SentUnvaried reports whether sent, the header a fetch carried upstream,
// held a header the route learned from Vary (LearnVary) that names, the
// Vary of that fetch's own answer, does not name. A learned header is
// forwarded on every request of the route, as the route cannot know which
// of its URLs read it before their answers say so; but only an answer
// that names it in Vary is keyed on it (stored as the variant its value
// selects, RFC 9111 §4.1). An answer that does not name it may still have
// been shaped by it (an app that reads a header and forgets Vary), and
// stored under a key without it, it would serve the value one client sent
// — an attacker's "<script>" — to every client. Such an answer is for its
// own request alone: never stored nor shared. That is the README's
// promise that a stored answer was shaped only by what its key holds,
// strict for storage, and it costs nothing to a request that sends no
// learned header: its fetch carries only what the key holds, as before
// the route learned.
//
// The route's learned names only grow, so the names learned now hold
// every one learned when sent was built; a header in sent that is learned
// now was learned then, as Copy forwarded it (the keyed ones are never
// learned). What sent held is read as it went on the wire (OnWire): the
// empty User-Agent of a fetch whose client sent none carried nothing.
// own are headers the caller set on the fetch itself, whatever
// the client sent (the bulk call's Accept: application/json): no client
// shaped those. The first time a route refuses an answer for a header, it
// is logged.
func (f *Rules) SentUnvaried(sent http.Header, names []string, own ...string) bool {
	for _, n := range *f.learned.Load() {
		if OnWire(sent, n) && !slices.Contains(names, n) && !slices.Contains(own, n) {
			if f.logged.first(f.route, "\x00unvaried "+n) {
				f.log.Warn("answer not stored: its request carried a header the route learned from another answer's Vary, and this answer's Vary does not name it; add it to Vary (or key.headers) if the upstream reads it",
					"route", f.route, "header", n)
			}
			return true
		}
	}
	return false
}

// LearnVary forwards, from now on, every header of names that the request
// header h carried but the route withheld; it reports whether it learned
// one, so the caller can fetch again with it. What h carries is what its
// fetch would put on the wire (OnWire): a client's empty User-Agent
// teaches nothing, as no fetch could send it.
func (f *Rules) LearnVary(h http.Header, names []string) bool {
	learned := false
	for _, n := range names {
		if OnWire(h, n) && !Own(n) && !f.Forwards(n) {
			learned = f.learn(n) || learned
		}
	}
	return learned
}

func (f *Rules) learn(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := *f.learned.Load()
	if slices.Contains(cur, name) {
		return true
	}
	if len(cur) >= maxLearned {
		return false
	}
	next := append(slices.Clone(cur), name)
	f.learned.Store(&next)
	f.grouped.Store(f.groupedNames(next))
	f.log.Info("forwarding a header the route's answers vary on", "route", f.route, "header", name)
	return true
}

// Copy fills dst with what the route forwards of src, Accept-Encoding
// reduced to the codings a variant may be stored in
// (cachekey.ForwardAcceptEncoding). Headers Never names are left out
// silently; other withheld ones are logged once per route and name.
// Fields that src's Connection names are the caller's to remove.
func (f *Rules) Copy(dst, src http.Header) {
	var withheld []string
	for k, vs := range src {
		switch {
		case f.never(k), Own(k):
		case k == "Accept-Encoding":
			dst[k] = []string{cachekey.ForwardAcceptEncoding(vs)}
		case f.Forwards(k):
			dst[k] = vs
		default:
			withheld = append(withheld, k)
		}
	}
	if len(withheld) > 0 {
		f.logWithheld(withheld)
	}
}

// logWithheld tells the operator, once per route and header in the life of
// the process, that a header was not forwarded: an app that needs X-Api-Key
// then answers 401, and the log says why (fail closed, where forwarding it
// would have shared one client's answer with clients without a key). A
// header that cannot matter that way (quiet) is said at debug level only.
func (f *Rules) logWithheld(names []string) {
	for _, n := range names {
		if !f.logged.first(f.route, n) {
			continue
		}
		if quiet(n) {
			f.log.Debug("request header not forwarded on a cached route", "route", f.route, "header", n)
			continue
		}
		f.log.Warn("request header not forwarded on a cached route; list it in key.headers (or set forward_headers: all) if the upstream needs it",
			"route", f.route, "header", n)
	}
}

// quiet reports whether withholding the (canonical) header is no news to
// the operator: it describes the client or the request's path through
// caches, not what the app should answer (User-Agent, Referer,
// Cache-Control, Pragma, fetch metadata), or it negotiates content, which
// an app that honours it declares with Vary — and a Vary'd header is
// learned and forwarded from then on (LearnVary). Content-Length frames a
// request body the cached path never sends (a GET with Content-Length: 0).
func quiet(name string) bool {
	switch name {
	case "User-Agent", "Referer", "Cache-Control", "Pragma", "Dnt", "Priority", "Content-Length",
		"Upgrade-Insecure-Requests", "Accept", "Accept-Language", "Accept-Charset", "Origin":
		return true
	}
	return strings.HasPrefix(name, "Sec-Fetch-") || strings.HasPrefix(name, "Sec-Ch-")
}

// Group is the batch group of a request to host with header h: the host
// and the values of every header that reaches the upstream and could
// change the answer, in a canonical order. Requests of one group share one
// bulk call, which carries the opener's headers.
func (f *Rules) Group(host string, h http.Header) string {
	// Built once per batched request: the names on the stack when few,
	// and the string in one allocation.
	var scratch [8]string
	names := scratch[:0]
	host = strings.ToLower(host)
	n := len(host)
	if !f.all {
		// Only the route's few grouped names can count: look them up
		// (already in order). With none, as on most routes, the group is
		// the host, the same string the loop below would build.
		for _, k := range *f.grouped.Load() {
			if vs, ok := h[k]; ok {
				names = append(names, k)
				n += 1 + len(k)
				for _, v := range vs {
					n += 1 + len(v)
				}
			}
		}
		if len(names) == 0 {
			return host
		}
		return join(host, n, names, h)
	}
	for k, vs := range h {
		keyed := slices.Contains(f.keyed, k) && !Own(k)
		if !keyed && (!f.Forwards(k) || f.never(k) || ignoredInGroup(k)) {
			continue
		}
		names = append(names, k)
		n += 1 + len(k)
		for _, v := range vs {
			n += 1 + len(v)
		}
	}
	slices.Sort(names)
	return join(host, n, names, h)
}

// join is the group string of host and the headers names of h, n bytes.
func join(host string, n int, names []string, h http.Header) string {
	var b strings.Builder
	b.Grow(n)
	b.WriteString(host)
	for _, k := range names {
		b.WriteByte('\n')
		b.WriteString(k)
		for _, v := range h[k] {
			b.WriteByte('\x00')
			b.WriteString(v)
		}
	}
	return b.String()
}

// Grouped reports whether requests of one batch group all send the same
// value of the (canonical) header name in their bulk call: the group is
// keyed on it. A bulk answer that varies on it holds, for every member,
// the variant that member's own request would have got.
func (f *Rules) Grouped(name string) bool {
	if slices.Contains(f.keyed, name) && !Own(name) {
		return true
	}
	return f.Forwards(name) && !f.never(name) && !ignoredInGroup(name)
}

// groupIgnored are forwarded request headers that do not change what the
// upstream answers for an id, so requests differing only in them may share
// a batch (the bulk call asks for JSON and decompresses itself). A header
// the route keys on always counts. Read only.
var groupIgnored = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "User-Agent": true, "Referer": true, "Cache-Control": true, "Pragma": true,
	"Via": true, "Baggage": true, "Content-Length": true,
	"X-Vegeta-Seq": true, // the load generator's per-request counter
}

func ignoredInGroup(k string) bool {
	return groupIgnored[k] || slices.Contains(tracingHeaders[:], k) || strings.HasPrefix(k, "X-B3-")
}
