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
	Kind    string // read, write, list
	Route   string // r, p, t, u
	Replica int
	Who     *identity
	Method  string
	Path    string // as sent, escaped
	Query   string // as sent, raw
	Hdr     http.Header
	Sent    map[string]string // dimension → value this request sent ("" none)
	Res     string
	Ids     []string // list
	Rid     string
	Host    string // Host header; "" is the run's Host
	Budget  int
	Hangup  bool // write-hangup: the client leaves once the request is sent
	// absolute: sent in absolute-form (GET http://host/path, RFC 9112
	// §3.2.2) through the identity's proxy-configured client.
	Absolute bool
	// body: a write's body; chunked: sent chunked with trailers; expect:
	// with Expect: 100-continue.
	Body            string
	Chunked, Expect bool
	// cond is the conditional this request sent (conditional.go).
	Cond cond
	// crowd: sent in a crowd round (crowd.go), over a healthy origin.
	Crowd bool
}

func (q *request) String() string {
	u := q.Path
	if q.Query != "" {
		u += "?" + q.Query
	}
	var h []string
	for _, k := range []string{"Accept-Encoding", "Accept-Language", "X-Tenant", "Cookie", "Authorization", "Cache-Control", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
		if vs, ok := q.Hdr[k]; ok {
			v := strings.Join(vs, "|")
			if len(v) > 40 {
				v = v[:40] + "…"
			}
			h = append(h, k+"="+v)
		}
	}
	for _, k := range []string{"Range", "Expect"} {
		if v := q.Hdr.Get(k); v != "" {
			h = append(h, k+"="+v)
		}
	}
	if q.Absolute {
		u = "http://" + q.Host + u
	}
	if q.Chunked {
		h = append(h, "chunked+trailers")
	}
	return fmt.Sprintf("%s(%s)@replica%d %s %s [%s]", q.Who.Name, q.Who.Addr, q.Replica, q.Method, u, strings.Join(h, " "))
}

// drawRequest draws the next request; hot is the round's hot resource id.
func (r *run) drawRequest(hot string) *request {
	m := r.cfg.Mix
	who := r.Ids[r.rng.IntN(len(r.Ids))]
	q := &request{
		Who: who, Replica: r.rng.IntN(len(r.cfg.Replicas)), Method: http.MethodGet, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		Kind: "read", Route: "r", Budget: BudgetRead,
	}
	id := hot
	if r.chance(35) {
		id = fmt.Sprint(1 + r.rng.IntN(4))
	}
	roll := r.rng.IntN(100)
	switch {
	case m.Has("write") && roll < 12:
		q.Kind, q.Method, q.Budget = "write", http.MethodPatch, BudgetWrite
		q.Path = "/r/" + id
		if m.Has("write-spelling") && r.chance(40) {
			q.Path = pick(r, "/r/0"+id, "/r/"+id+"/", "/R/"+id, "//r/"+id, "/r/./"+id, "/r/"+id+";v=1", "/r/%2B"+id)
		}
		if m.Has("percent-path") && r.chance(10) {
			// RFC 3986 §6.2.2.2: %3N is the digit N; the origin decodes it.
			q.Path = pick(r, "/r/%3"+id, "/%72/"+id, "/r/%2e/"+id)
		}
		q.Hangup = m.Has("write-hangup") && r.chance(15)
		if m.Has("no-cache") && r.chance(20) {
			q.Path = "/n/" + id // the route that honours no-cache
		}
	case roll < 18:
		q.Route = "t"
		name := "plain"
		if m.Has("write-non-utf8") && r.chance(60) {
			name = "caf%E9"
		}
		q.Path = "/t/" + name
		if m.Has("write") && r.chance(25) {
			q.Kind, q.Method, q.Budget = "write", http.MethodPatch, BudgetWrite
		}
	case m.Has("batch") && roll < 28:
		q.Route = "u"
		uid := fmt.Sprint(1 + r.rng.IntN(8))
		if m.Has("bad-ids") && r.chance(15) {
			uid = "99999999999999999999"
		}
		q.Path = "/u/" + uid
	case m.Has("batch") && roll < 34:
		q.Kind, q.Route, q.Path = "list", "u", "/u"
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
			q.Ids = append(q.Ids, uid)
		}
		if again := r.rng.IntN(100); m.Has("if-none-match") && len(r.lists) > 0 && again < 40 {
			// The same list again, so a client may revalidate it (the
			// split list's ETag is the sidecar's, over the bytes).
			q.Ids = r.lists[again%len(r.lists)]
		} else if len(r.lists) < 8 && !slices.ContainsFunc(q.Ids, func(id string) bool { return !goodID("/" + id) }) {
			r.lists = append(r.lists, q.Ids) // good ids only: a list that fails has no ETag
		}
		q.Query = "ids=" + strings.Join(q.Ids, ",")
		q.Budget = BudgetList(len(q.Ids))
	case m.Has("no-cache") && roll < 38:
		// freshness: origin, request_no_cache: refresh: no-cache reads
		// are forced refreshes, one per key at a time.
		q.Route, q.Path = "n", "/n/"+id
	case roll < 45:
		q.Route, q.Path = "p", "/p/"+id
		q.Query = "fields=" + pick(r, "name", "email")
		if m.Has("extra-param") && r.chance(50) {
			q.Query += "&callback=cb" + fmt.Sprint(r.rng.IntN(1000))
		}
	case m.Has("host-spelling") && roll >= 92:
		q.Route, q.Path = "h", "/h/"+id
		q.Host = pick(r, r.cfg.Host, "svc", "svc.ns.svc.cluster.local", strings.ToUpper(r.cfg.Host))
	case m.Has("batch-etag-field") && roll >= 86:
		// batch.etag_field: the element's ETag is the app's own field.
		q.Route, q.Path = "e", "/e/"+fmt.Sprint(1+r.rng.IntN(8))
		if m.Has("write") && r.chance(20) {
			q.Kind, q.Method, q.Budget = "write", http.MethodPatch, BudgetWrite
		}
	default:
		q.Path = "/r/" + id
		if m.Has("path-spelling") && r.chance(15) {
			q.Path = pick(r, "/r/0"+id, "/r/"+id+"/", "/R/"+id)
		}
		if m.Has("percent-path") && r.chance(6) {
			q.Path = pick(r, "/r/%3"+id, "/%72/"+id, "/r/%2e/"+id, "/r/"+id+"%2F")
		}
		q.Query = r.drawQuery()
		if m.Has("head") && r.chance(15) {
			q.Method = http.MethodHead // a GET route answers HEAD from its GET entry
		}
	}
	if q.Kind != "list" {
		q.Res = origin.Resource(q.Path)
	}
	r.drawEdges(q)
	r.drawHeaders(q)
	if q.Method == http.MethodGet {
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
	h := q.Hdr
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
			q.Sent["lang"] = lang
		}
	}
	if m.Has("tenant") && q.Who.Tenant != "" && r.chance(70) {
		h.Set("X-Tenant", q.Who.Tenant)
		q.Sent["tenant"] = q.Who.Tenant
	}
	if m.Has("duplicate-headers") && r.chance(8) {
		r.drawDuplicates(q)
	}
	if m.Has("cookie") && r.chance(25) {
		h.Set("Cookie", "sid="+q.Who.Name)
		if m.Has("cookie-empty-first") && q.Route == "p" && r.chance(60) {
			h["Cookie"] = []string{"", "sid=" + q.Who.Name}
		}
		q.Sent["cookie"] = q.Who.Name
	}
	if m.Has("auth") && r.chance(15) {
		h.Set("Authorization", "Bearer "+q.Who.Name)
		if m.Has("cookie-empty-first") && q.Route == "p" && r.chance(60) {
			h["Authorization"] = []string{"", "Bearer " + q.Who.Name}
		}
		q.Sent["auth"] = q.Who.Name
	}
	if m.Has("request-id") && r.chance(50) {
		r.Rid++
		q.Rid = fmt.Sprintf("rid-%d-%d", r.cfg.Seed, r.Rid)
		h.Set("X-Request-Id", q.Rid)
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
	req, err := r.newRequest(ctx, q, r.cfg.Replicas[q.Replica])
	if err != nil {
		r.violate("harness", "%s: %v", q, err)
		return
	}
	for k, vs := range q.Hdr {
		req.Header[k] = vs
	}
	if q.Hangup {
		hctx, cancel := context.WithCancel(req.Context()) // keeps proxyKey
		defer cancel()
		req = req.WithContext(httptrace.WithClientTrace(hctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { cancel() },
		}))
	}
	start := now()
	client := q.Who.Client
	if q.Absolute {
		client = q.Who.Proxied
	}
	resp, err := client.Do(req)
	if q.Hangup {
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
