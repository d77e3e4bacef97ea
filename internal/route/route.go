// Package route compiles the configured routes into a Table that finds,
// for a request, the first route whose methods and chi-style pattern match.
//
// Matching is first-match-wins in configuration order, as operators read a
// route list, rather than chi's most-specific-wins: the order in the file
// is the order of precedence. A pattern by itself matches exactly as chi
// would match it (see pattern).
package route

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/cachekey"
)

// Spec is one route as the operator wrote it; Compile turns specs into
// Routes.
type Spec struct {
	Name    string
	Methods []string // default GET, HEAD
	Pattern string

	TTL, StaleWhileRevalidate, StaleIfError, NegativeTTL time.Duration

	Key cachekey.Options
	// ForwardAll forwards every request header on the cached path, not
	// only those the key (or a learned Vary) holds.
	ForwardAll bool
	// Tags and Invalidate are templates such as "client:{id}".
	Tags, Invalidate []string

	Batch *Batch
	// Split names its target in Split.RouteName; Compile sets Split.Route.
	Split *Split
	// Origin, when set, takes freshness from the origin's headers
	// (freshness: origin); nil keeps the route's ttl.
	Origin *Origin
	// RequestNoCache is what a client's no-cache (Cache-Control: no-cache
	// or max-age=0, Pragma: no-cache) does: "refresh" fetches anew, "ignore"
	// answers from the cache as if it were absent; "": refresh with Origin
	// (RFC 9111 §5.2.1), ignore without (as NGINX and Varnish do).
	RequestNoCache string
}

// Origin is the origin-freshness mode of a route (RFC 9111 §4.2): TTL is
// then only the heuristic for responses without explicit freshness.
type Origin struct {
	// MaxTTL caps every freshness lifetime; 0: no cap.
	MaxTTL time.Duration
	// Targets are the RFC 9213 targeted fields obeyed in precedence
	// order; nil: httpcache.DefaultTargets; empty: none.
	Targets []string
}

// Route is a compiled route. Treat it as read-only: the table shares it
// between requests.
type Route struct {
	Name    string
	Methods []string
	Pattern string

	TTL, StaleWhileRevalidate, StaleIfError, NegativeTTL time.Duration

	// Key has its Query names sorted and its Headers canonicalised and
	// sorted, so equal configurations build equal keys.
	Key cachekey.Options
	// ForwardAll: see Spec.ForwardAll.
	ForwardAll bool
	// RefreshOnRequest: a client's no-cache refreshes (Spec.RequestNoCache
	// resolved).
	RefreshOnRequest bool
	// Tags label the entries this route stores; Invalidate are dropped
	// after a 2xx answer to one of its unsafe methods.
	Tags, Invalidate []Template

	// Batch serves this per-ID route from one bulk upstream call.
	Batch *Batch
	// Split serves this list route per ID from Split.Route's cache.
	Split *Split
	// Origin: see Spec.Origin.
	Origin *Origin

	pat pattern
}

// Batch configures a per-ID route served by a bulk upstream call: ids are
// collected for up to MaxWait or MaxSize ids, then fetched with
// GET Path?Param=id1,id2 and the JSON array split by IDField.
type Batch struct {
	Path    string
	Param   string
	IDField string
	// ETagField names the element field holding the app's validator for
	// the element (bulk.ElementETag); "": one over the element's bytes.
	ETagField string
	// IDParam is the route's one path param, the id; Compile fills it.
	IDParam string
	MaxSize int           // 0: the batch package's default
	MaxWait time.Duration // 0: the batch package's default
	// MaxInFlight bounds the bulk calls of one group at once; 0: the
	// batch package's default.
	MaxInFlight int
	// MaxRouteInFlight bounds the bulk calls of all the route's groups
	// at once; 0: internal/batchroute's default, four groups' MaxInFlight.
	MaxRouteInFlight int
}

// Split configures a list route (GET /users?ids=1,2) answered per ID from
// the cache of a batch route.
type Split struct {
	Param     string
	RouteName string
	Route     *Route // resolved by Compile
	// MaxIDs bounds the distinct ids of one list request; more is a 400.
	// 0: DefaultSplitMaxIDs.
	MaxIDs int
}

// DefaultSplitMaxIDs is Split.MaxIDs when none is given.
const DefaultSplitMaxIDs = 1000

// Param is one matched path param; the wildcard's key is "*".
type Param struct{ Key, Value string }

// Params are the matched path params in pattern order.
type Params []Param

// Get returns the value of the named param, or "".
func (p Params) Get(name string) string {
	for i := range p {
		if p[i].Key == name {
			return p[i].Value
		}
	}
	return ""
}

// ParamNames returns the pattern's param names in order ("*" for a
// trailing wildcard).
func (r *Route) ParamNames() []string { return slices.Clone(r.pat.names) }

// Allows reports whether the route serves method. A route for GET serves
// HEAD too, from the same entry: a HEAD is a GET without the body (RFC 9110
// §9.3.2), and a cache answers it from the stored GET response (RFC 9111
// §4), as Varnish and NGINX do. Other methods are listed exactly.
func (r *Route) Allows(method string) bool {
	for _, m := range r.Methods {
		if m == method || m == http.MethodGet && method == http.MethodHead {
			return true
		}
	}
	return false
}

// Cacheable reports whether the route stores responses: it takes GET or
// HEAD, is not a split route (which only reads its target's entries), and
// keeps entries for some time, fresh or stale.
func (r *Route) Cacheable() bool {
	return r.Split == nil &&
		(r.Allows(http.MethodGet) || r.Allows(http.MethodHead)) &&
		(r.TTL > 0 || r.StaleWhileRevalidate > 0 || r.StaleIfError > 0 || r.NegativeTTL > 0 || r.Origin != nil)
}

// Table is an ordered, immutable set of compiled routes.
type Table struct {
	routes []*Route
	byName map[string]*Route
}

// Match returns the first route that allows method and whose pattern
// matches path, with its params. A route whose pattern matches but whose
// methods do not is skipped, so a later route may take the request.
// path is matched as given; chi would use r.URL.RawPath when set.
//
// Match allocates only the returned Params, and nothing for a route
// without params; MatchAppend allocates nothing.
func (t *Table) Match(method, path string) (*Route, Params, bool) {
	var scratch [8]Param
	r, ps, ok := t.MatchAppend(scratch[:0], method, path)
	if !ok || len(ps) == 0 {
		return r, nil, ok
	}
	return r, slices.Clone(ps), true
}

// MatchAppend is Match appending the params to dst.
func (t *Table) MatchAppend(dst Params, method, path string) (*Route, Params, bool) {
	for _, r := range t.routes {
		if !r.Allows(method) {
			continue
		}
		if ps, ok := r.pat.match(path, dst); ok {
			return r, ps, true
		}
	}
	return nil, dst, false
}

// Route returns the route called name, or nil.
func (t *Table) Route(name string) *Route { return t.byName[name] }

// Routes returns the routes in order of precedence.
func (t *Table) Routes() []*Route { return slices.Clone(t.routes) }

// MarshalJSON writes the routes in order, for GET /routes.
func (t *Table) MarshalJSON() ([]byte, error) { return json.Marshal(t.routes) }

// Compile checks and compiles specs in order. It reports every problem at
// once, each naming its route.
func Compile(specs []Spec) (*Table, error) {
	t := &Table{byName: make(map[string]*Route, len(specs))}
	var errs []error
	fail := func(label string, err error) {
		errs = append(errs, fmt.Errorf("route %s: %w", label, err))
	}
	for i := range specs {
		s := &specs[i]
		label := fmt.Sprintf("%q", s.Name)
		if s.Name == "" {
			label = fmt.Sprintf("#%d", i+1)
			fail(label, errors.New("no name"))
		} else if t.byName[s.Name] != nil {
			fail(label, errors.New("name used twice"))
		}
		r, rerrs := compileOne(s)
		for _, err := range rerrs {
			fail(label, err)
		}
		if s.Name != "" && t.byName[s.Name] == nil {
			t.byName[s.Name] = r
		}
		t.routes = append(t.routes, r)
	}
	for i, r := range t.routes {
		if r.Split == nil {
			continue
		}
		if err := resolveSplit(t, r); err != nil {
			label := fmt.Sprintf("%q", r.Name)
			if r.Name == "" {
				label = fmt.Sprintf("#%d", i+1)
			}
			fail(label, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

func compileOne(s *Spec) (*Route, []error) {
	var errs []error
	r := &Route{
		Name:                 s.Name,
		Pattern:              s.Pattern,
		TTL:                  s.TTL,
		StaleWhileRevalidate: s.StaleWhileRevalidate,
		StaleIfError:         s.StaleIfError,
		NegativeTTL:          s.NegativeTTL,
		ForwardAll:           s.ForwardAll,
		Origin:               s.Origin,
		RefreshOnRequest:     s.RequestNoCache == "refresh" || s.RequestNoCache == "" && s.Origin != nil,
	}

	pat, err := parsePattern(s.Pattern)
	if err != nil {
		errs = append(errs, fmt.Errorf("path %q: %w", s.Pattern, err))
	}
	r.pat = pat

	r.Methods, err = methods(s.Methods)
	if err != nil {
		errs = append(errs, err)
	}

	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttl", s.TTL}, {"stale_while_revalidate", s.StaleWhileRevalidate}, {"stale_if_error", s.StaleIfError}, {"negative_ttl", s.NegativeTTL}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: negative duration %v", d.name, d.v))
		}
	}

	r.Key, err = keyOptions(s.Key)
	if err != nil {
		errs = append(errs, err)
	}
	// A route of HEAD without GET stores for its HEADs alone, under keys
	// of their own (cachekey.Options.HeadApart): a GET of its paths is
	// another route's (or none's), whose entries carry other tags.
	r.Key.HeadApart = r.Allows(http.MethodHead) && !r.Allows(http.MethodGet)

	r.Tags, errs = templates("tags", s.Tags, pat.names, errs)
	r.Invalidate, errs = templates("invalidate", s.Invalidate, pat.names, errs)
	if len(r.Invalidate) > 0 && !slices.ContainsFunc(r.Methods, isUnsafe) {
		errs = append(errs, errors.New("invalidate: the route has no unsafe method (POST, PUT, PATCH, DELETE) to trigger it"))
	}

	if s.Batch != nil && s.Split != nil {
		errs = append(errs, errors.New("batch and split are exclusive"))
	}
	if s.Batch != nil {
		b := *s.Batch
		errs = append(errs, checkBatch(&b, r, pat.names)...)
		r.Batch = &b
	}
	if s.Split != nil {
		sp := *s.Split
		sp.Route = nil
		r.Split = &sp
		if sp.Param == "" {
			errs = append(errs, errors.New("split: no param"))
		}
		if sp.MaxIDs == 0 {
			sp.MaxIDs = DefaultSplitMaxIDs
		} else if sp.MaxIDs < 0 {
			errs = append(errs, fmt.Errorf("split: negative max_ids %d", sp.MaxIDs))
		}
		if !r.Allows(http.MethodGet) {
			errs = append(errs, errors.New("split: the route must allow GET"))
		}
	}
	return r, errs
}

func methods(in []string) ([]string, error) {
	if len(in) == 0 {
		return []string{http.MethodGet, http.MethodHead}, nil
	}
	out := make([]string, 0, len(in))
	for _, m := range in {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "" || strings.ContainsFunc(m, func(c rune) bool { return c <= ' ' || c >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) }) {
			return out, fmt.Errorf("methods: %q is not a method", m)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

func isUnsafe(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// keyOptions copies o with Query sorted and Headers canonicalised, sorted
// and deduplicated.
func keyOptions(o cachekey.Options) (cachekey.Options, error) {
	if o.AllQuery && len(o.Query) > 0 {
		return o, errors.New("key: all query params and a query list are exclusive")
	}
	out := cachekey.Options{AllQuery: o.AllQuery, NoHost: o.NoHost, Host: strings.ToLower(o.Host)}
	if len(o.Query) > 0 {
		out.Query = slices.Compact(slices.Sorted(slices.Values(o.Query)))
	}
	for _, h := range o.Headers {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, " \t:") {
			return out, fmt.Errorf("key: headers: %q is not a header name", h)
		}
		out.Headers = append(out.Headers, textproto.CanonicalMIMEHeaderKey(h))
	}
	if len(out.Headers) > 0 {
		slices.Sort(out.Headers)
		out.Headers = slices.Compact(out.Headers)
	}
	return out, nil
}

func templates(field string, srcs, params []string, errs []error) ([]Template, []error) {
	var ts []Template
	for _, s := range srcs {
		t, err := ParseTemplate(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			continue
		}
		for _, n := range t.Params() {
			if !slices.Contains(params, n) {
				errs = append(errs, fmt.Errorf("%s: template %q names {%s}, which the path lacks", field, s, n))
			}
		}
		ts = append(ts, t)
	}
	return ts, errs
}

func checkBatch(b *Batch, r *Route, params []string) []error {
	var errs []error
	switch {
	case len(params) != 1 || params[0] == "*":
		errs = append(errs, fmt.Errorf("batch: the path must have exactly one named param, the id (has %d)", len(params)))
	case b.IDParam != "" && b.IDParam != params[0]:
		errs = append(errs, fmt.Errorf("batch: id param %q is not the path's param {%s}", b.IDParam, params[0]))
	default:
		b.IDParam = params[0]
	}
	if !strings.HasPrefix(b.Path, "/") {
		errs = append(errs, fmt.Errorf("batch: path %q must begin with '/'", b.Path))
	}
	if b.Param == "" {
		errs = append(errs, errors.New("batch: no param"))
	}
	if b.IDField == "" {
		errs = append(errs, errors.New("batch: no id_field"))
	}
	if b.MaxSize < 0 {
		errs = append(errs, fmt.Errorf("batch: negative max_size %d", b.MaxSize))
	}
	if b.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("batch: negative max_wait %v", b.MaxWait))
	}
	if !r.Allows(http.MethodGet) {
		errs = append(errs, errors.New("batch: the route must allow GET"))
	}
	return errs
}

// resolveSplit points r.Split at its target, which must be a batch route:
// the bulk call fetches the missing ids and its id_field splits the answer.
func resolveSplit(t *Table, r *Route) error {
	name := r.Split.RouteName
	target := t.byName[name]
	switch {
	case name == "":
		return errors.New("split: no route")
	case target == nil:
		return fmt.Errorf("split: no route named %q", name)
	case target == r:
		return errors.New("split: a route cannot split into itself")
	case target.Batch == nil:
		return fmt.Errorf("split: route %q has no batch settings to fetch missing ids with", name)
	}
	r.Split.Route = target
	return nil
}

// keyJSON is a route's key block as the config spells it: the cachekey
// options and key.host (request, none or the canonical host).
type keyJSON struct {
	cachekey.Options
	Host string `json:"host"`
}

// MarshalJSON writes the route for GET /routes: every effective field
// under its config name (docs/admin-api.md), durations as Go duration
// strings, templates as written, the split target by name. Fields the
// operator cannot set (the batch's id param, derived from the path) are
// left out, so a reload can be confirmed field by field against the file.
func (r *Route) MarshalJSON() ([]byte, error) {
	type batchJSON struct {
		Path        string `json:"path"`
		Param       string `json:"param"`
		IDField     string `json:"id_field"`
		ETagField   string `json:"etag_field,omitempty"`
		MaxSize     int    `json:"max_size"`
		MaxWait     string `json:"max_wait"`
		MaxInFlight int    `json:"max_in_flight"`
		MaxRoute    int    `json:"max_route_in_flight"`
	}
	type splitJSON struct {
		Param  string `json:"param"`
		Route  string `json:"route"`
		MaxIDs int    `json:"max_ids"`
	}
	v := struct {
		Name                 string     `json:"name"`
		Methods              []string   `json:"methods"`
		Pattern              string     `json:"path"`
		Params               []string   `json:"params,omitempty"`
		TTL                  string     `json:"ttl"`
		StaleWhileRevalidate string     `json:"stale_while_revalidate"`
		StaleIfError         string     `json:"stale_if_error"`
		NegativeTTL          string     `json:"negative_ttl"`
		Freshness            string     `json:"freshness"`
		MaxTTL               string     `json:"max_ttl"`
		TargetedFields       []string   `json:"targeted_fields"`
		ForwardHeaders       string     `json:"forward_headers"`
		RequestNoCache       string     `json:"request_no_cache"`
		Key                  keyJSON    `json:"key"`
		Tags                 []Template `json:"tags,omitempty"`
		Invalidate           []Template `json:"invalidate,omitempty"`
		Batch                *batchJSON `json:"batch,omitempty"`
		Split                *splitJSON `json:"split,omitempty"`
		Cacheable            bool       `json:"cacheable"`
	}{
		Name: r.Name, Methods: r.Methods, Pattern: r.Pattern, Params: r.pat.names,
		TTL: r.TTL.String(), StaleWhileRevalidate: r.StaleWhileRevalidate.String(),
		StaleIfError: r.StaleIfError.String(), NegativeTTL: r.NegativeTTL.String(),
		Freshness: "route", MaxTTL: time.Duration(0).String(), TargetedFields: []string{},
		ForwardHeaders: "keyed", RequestNoCache: "ignore",
		Key: keyJSON{r.Key, "request"}, Tags: r.Tags, Invalidate: r.Invalidate, Cacheable: r.Cacheable(),
	}
	switch {
	case r.Key.NoHost:
		v.Key.Host = "none"
	case r.Key.Host != "":
		v.Key.Host = r.Key.Host
	}
	if o := r.Origin; o != nil {
		v.Freshness, v.MaxTTL = "origin", o.MaxTTL.String()
		if o.Targets != nil {
			v.TargetedFields = o.Targets
		}
	}
	if r.ForwardAll {
		v.ForwardHeaders = "all"
	}
	if r.RefreshOnRequest {
		v.RequestNoCache = "refresh"
	}
	if b := r.Batch; b != nil {
		v.Batch = &batchJSON{b.Path, b.Param, b.IDField, b.ETagField, b.MaxSize, b.MaxWait.String(), b.MaxInFlight, b.MaxRouteInFlight}
	}
	if s := r.Split; s != nil {
		maxIDs := s.MaxIDs
		if maxIDs <= 0 {
			maxIDs = DefaultSplitMaxIDs
		}
		v.Split = &splitJSON{s.Param, s.RouteName, maxIDs}
	}
	return json.Marshal(v)
}
