package invariant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/relay"
)

// request is one drawn client request and what its answer is checked
// against: the dimension values it sent, the resource the origin would
// answer for, and its budget of upstream calls.
type request struct {
	kind    string // read, write, list
	route   string // r, p, t, u
	replica int
	who     *identity
	method  string
	path    string // as sent, escaped
	query   string // as sent, raw
	hdr     http.Header
	sent    map[string]string // dimension → value this request sent ("" none)
	res     string
	ids     []string // list
	rid     string
	host    string // Host header; "" is the run's Host
	budget  int
	hangup  bool // write-hangup: the client leaves once the request is sent
	// absolute: sent in absolute-form (GET http://host/path, RFC 9112
	// §3.2.2) through the identity's proxy-configured client.
	absolute bool
	// body: a write's body; chunked: sent chunked with trailers; expect:
	// with Expect: 100-continue.
	body            string
	chunked, expect bool
	// cond is the conditional this request sent (conditional.go).
	cond cond
	// crowd: sent in a crowd round (crowd.go), over a healthy origin.
	crowd bool
}

func (q *request) String() string {
	u := q.path
	if q.query != "" {
		u += "?" + q.query
	}
	var h []string
	for _, k := range []string{"Accept-Encoding", "Accept-Language", "X-Tenant", "Cookie", "Authorization", "Cache-Control", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
		if vs, ok := q.hdr[k]; ok {
			v := strings.Join(vs, "|")
			if len(v) > 40 {
				v = v[:40] + "…"
			}
			h = append(h, k+"="+v)
		}
	}
	for _, k := range []string{"Range", "Expect"} {
		if v := q.hdr.Get(k); v != "" {
			h = append(h, k+"="+v)
		}
	}
	if q.absolute {
		u = "http://" + q.host + u
	}
	if q.chunked {
		h = append(h, "chunked+trailers")
	}
	return fmt.Sprintf("%s(%s)@replica%d %s %s [%s]", q.who.name, q.who.addr, q.replica, q.method, u, strings.Join(h, " "))
}

// drawRequest draws the next request; hot is the round's hot resource id.
func (r *run) drawRequest(hot string) *request {
	m := r.cfg.Mix
	who := r.ids[r.rng.IntN(len(r.ids))]
	q := &request{
		who: who, replica: r.rng.IntN(len(r.cfg.Replicas)), method: http.MethodGet, hdr: http.Header{},
		sent: map[string]string{"addr": who.addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		kind: "read", route: "r", budget: BudgetRead,
	}
	id := hot
	if r.chance(35) {
		id = fmt.Sprint(1 + r.rng.IntN(4))
	}
	roll := r.rng.IntN(100)
	switch {
	case m.Has("write") && roll < 12:
		q.kind, q.method, q.budget = "write", http.MethodPatch, BudgetWrite
		q.path = "/r/" + id
		if m.Has("write-spelling") && r.chance(40) {
			q.path = pick(r, "/r/0"+id, "/r/"+id+"/", "/R/"+id, "//r/"+id, "/r/./"+id, "/r/"+id+";v=1", "/r/%2B"+id)
		}
		if m.Has("percent-path") && r.chance(10) {
			// RFC 3986 §6.2.2.2: %3N is the digit N; the origin decodes it.
			q.path = pick(r, "/r/%3"+id, "/%72/"+id, "/r/%2e/"+id)
		}
		q.hangup = m.Has("write-hangup") && r.chance(15)
		if m.Has("no-cache") && r.chance(20) {
			q.path = "/n/" + id // the route that honours no-cache
		}
	case roll < 18:
		q.route = "t"
		name := "plain"
		if m.Has("write-non-utf8") && r.chance(60) {
			name = "caf%E9"
		}
		q.path = "/t/" + name
		if m.Has("write") && r.chance(25) {
			q.kind, q.method, q.budget = "write", http.MethodPatch, BudgetWrite
		}
	case m.Has("batch") && roll < 28:
		q.route = "u"
		uid := fmt.Sprint(1 + r.rng.IntN(8))
		if m.Has("bad-ids") && r.chance(15) {
			uid = "99999999999999999999"
		}
		q.path = "/u/" + uid
	case m.Has("batch") && roll < 34:
		q.kind, q.route, q.path = "list", "u", "/u"
		n := 1 + r.rng.IntN(40)
		bad := 10
		if r.chance(50) {
			bad = 90
		}
		for i := 0; i < n; i++ {
			uid := fmt.Sprint(1 + r.rng.IntN(64))
			if m.Has("bad-ids") && r.chance(bad) {
				uid = fmt.Sprintf("9%019d", r.rng.Uint64()%1e19)
			}
			q.ids = append(q.ids, uid)
		}
		if again := r.rng.IntN(100); m.Has("if-none-match") && len(r.lists) > 0 && again < 40 {
			// The same list again, so a client may revalidate it (the
			// split list's ETag is the sidecar's, over the bytes).
			q.ids = r.lists[again%len(r.lists)]
		} else if len(r.lists) < 8 && !slices.ContainsFunc(q.ids, func(id string) bool { return !goodID("/" + id) }) {
			r.lists = append(r.lists, q.ids) // good ids only: a list that fails has no ETag
		}
		q.query = "ids=" + strings.Join(q.ids, ",")
		q.budget = BudgetList(len(q.ids))
	case m.Has("no-cache") && roll < 38:
		// freshness: origin, request_no_cache: refresh: no-cache reads
		// are forced refreshes, one per key at a time.
		q.route, q.path = "n", "/n/"+id
	case roll < 45:
		q.route, q.path = "p", "/p/"+id
		q.query = "fields=" + pick(r, "name", "email")
		if m.Has("extra-param") && r.chance(50) {
			q.query += "&callback=cb" + fmt.Sprint(r.rng.IntN(1000))
		}
	case m.Has("host-spelling") && roll >= 92:
		q.route, q.path = "h", "/h/"+id
		q.host = pick(r, r.cfg.Host, "svc", "svc.ns.svc.cluster.local", strings.ToUpper(r.cfg.Host))
	case m.Has("batch-etag-field") && roll >= 86:
		// batch.etag_field: the element's ETag is the app's own field.
		q.route, q.path = "e", "/e/"+fmt.Sprint(1+r.rng.IntN(8))
		if m.Has("write") && r.chance(20) {
			q.kind, q.method, q.budget = "write", http.MethodPatch, BudgetWrite
		}
	default:
		q.path = "/r/" + id
		if m.Has("path-spelling") && r.chance(15) {
			q.path = pick(r, "/r/0"+id, "/r/"+id+"/", "/R/"+id)
		}
		if m.Has("percent-path") && r.chance(6) {
			q.path = pick(r, "/r/%3"+id, "/%72/"+id, "/r/%2e/"+id, "/r/"+id+"%2F")
		}
		q.query = r.drawQuery()
		if m.Has("head") && r.chance(15) {
			q.method = http.MethodHead // a GET route answers HEAD from its GET entry
		}
	}
	if q.kind != "list" {
		q.res = origin.Resource(q.path)
	}
	r.drawEdges(q)
	r.drawHeaders(q)
	if q.method == http.MethodGet {
		r.drawConditional(q)
	}
	return q
}

func pick(r *run, s ...string) string { return s[r.rng.IntN(len(s))] }

func (r *run) drawQuery() string {
	m := r.cfg.Mix
	if !r.chance(35) {
		return ""
	}
	parts := []string{"a=1", "b=2"}
	if m.Has("query-order") && r.chance(50) {
		parts = []string{"b=2", "a=1"}
	}
	if m.Has("query-repeat") && r.chance(50) {
		if r.chance(50) {
			parts = append(parts, "lang=fr", "lang=en")
		} else {
			parts = append(parts, "lang=en", "lang=fr")
		}
	}
	if m.Has("query-escape") && r.chance(50) {
		parts = append(parts, pick(r, "q=%zz", "q=%25zz", "c=1;d=2", "c=1%3Bd=2"))
	}
	return strings.Join(parts, "&")
}

func (r *run) drawHeaders(q *request) {
	m := r.cfg.Mix
	h := q.hdr
	if m.Has("accept-encoding") {
		choices := []string{"", "gzip", "identity", "gzip;q=0", "gzip, br"}
		if m.Has("accept-encoding-spellings") {
			choices = append(choices, "gzip, deflate", "gzip, deflate, br", "gzip, deflate, br, zstd", "br, gzip")
		}
		if m.Has("accept-encoding-q") && r.chance(15) {
			choices = []string{"gzip;q=0.001", "identity;q=0, gzip", "*;q=0", "GZIP", "gzip;q=1.0, *;q=0", "*",
				"x-gzip", "gzip ; q=0", "deflate;q=0.5, gzip;q=0", "*, gzip;q=0", "gzip;q=0.000", "br;q=1, gzip;q=0.5", "gzip;Q=0"}
		}
		if ae := pick(r, choices...); ae != "" {
			h.Set("Accept-Encoding", ae)
		}
	}
	if m.Has("accept-language") {
		lang := pick(r, "", "en", "fr", "de")
		if m.Has("long-accept-language") && r.chance(5) {
			lang = strings.Repeat("en-GB;q=0.9, ", 500) + "fr"
		}
		if lang != "" {
			h.Set("Accept-Language", lang)
			q.sent["lang"] = lang
		}
	}
	if m.Has("tenant") && q.who.tenant != "" && r.chance(70) {
		h.Set("X-Tenant", q.who.tenant)
		q.sent["tenant"] = q.who.tenant
	}
	if m.Has("duplicate-headers") && r.chance(8) {
		r.drawDuplicates(q)
	}
	if m.Has("cookie") && r.chance(25) {
		h.Set("Cookie", "sid="+q.who.name)
		if m.Has("cookie-empty-first") && q.route == "p" && r.chance(60) {
			h["Cookie"] = []string{"", "sid=" + q.who.name}
		}
		q.sent["cookie"] = q.who.name
	}
	if m.Has("auth") && r.chance(15) {
		h.Set("Authorization", "Bearer "+q.who.name)
		if m.Has("cookie-empty-first") && q.route == "p" && r.chance(60) {
			h["Authorization"] = []string{"", "Bearer " + q.who.name}
		}
		q.sent["auth"] = q.who.name
	}
	if m.Has("request-id") && r.chance(50) {
		r.rid++
		q.rid = fmt.Sprintf("rid-%d-%d", r.cfg.Seed, r.rid)
		h.Set("X-Request-Id", q.rid)
	}
	if m.Has("no-cache") && r.chance(10) {
		switch pick(r, "no-cache", "max-age=0", "pragma") {
		case "pragma":
			h.Set("Pragma", "no-cache")
		case "max-age=0":
			h.Set("Cache-Control", "max-age=0")
		default:
			h.Set("Cache-Control", "no-cache")
		}
	}
}

// do sends q and checks its answer.
func (r *run) do(ctx context.Context, q *request) {
	var hints atomic.Int64
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		if code != http.StatusContinue {
			hints.Add(1)
		}
		return nil
	}})
	req, err := r.newRequest(ctx, q, r.cfg.Replicas[q.replica])
	if err != nil {
		r.violate("harness", "%s: %v", q, err)
		return
	}
	for k, vs := range q.hdr {
		req.Header[k] = vs
	}
	if q.hangup {
		hctx, cancel := context.WithCancel(req.Context()) // keeps proxyKey
		defer cancel()
		req = req.WithContext(httptrace.WithClientTrace(hctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { cancel() },
		}))
	}
	start := now()
	client := q.who.client
	if q.absolute {
		client = q.who.proxied
	}
	resp, err := client.Do(req)
	if q.hangup {
		if err == nil {
			resp.Body.Close() // answered before the hang-up: not acknowledged either
		}
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			r.violate("transport", "%s: %v", q, err)
		}
		return
	}
	r.countEdges(q, resp)
	if n := hints.Load(); n > relay.MaxRelayed {
		r.violate("interim", "%s: %d 1xx relayed, at most %d", q, n, relay.MaxRelayed)
	}
	body, err := readBody(resp)
	resp.Body.Close()
	end := now()
	if err != nil && r.cfg.Mix.Has("truncate") && errors.Is(err, io.ErrUnexpectedEOF) {
		// A body the origin broke off reaches the client broken (RFC
		// 9112 §8): the right outcome. One that reads whole but short
		// fails its stamp's JSON below.
		return
	}
	if err != nil {
		r.violate("garbled", "%s: reading the answer: %v", q, err)
		return
	}
	r.checkTrailers(q, resp)
	r.check(q, resp, body, start, end)
}
