package server

import (
	"fmt"
	"slices"

	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
)

// keyOptions maps a route's key block to cachekey's options.
func keyOptions(k config.Key) cachekey.Options {
	o := cachekey.Options{Query: k.Query, AllQuery: k.Query == nil, Headers: k.Headers}
	switch k.Host {
	case "", "request":
	case "none":
		o.NoHost = true
	default:
		o.Host = k.Host
	}
	return o
}

// compileRoutes maps config routes to the route package's own specs.
func compileRoutes(rs []config.Route) (*route.Table, error) {
	specs := make([]route.Spec, 0, len(rs))
	for _, r := range rs {
		s := route.Spec{
			Name:                 r.Name,
			Methods:              r.Methods,
			Pattern:              r.Path,
			TTL:                  r.TTL.D(),
			StaleWhileRevalidate: r.StaleWhileRevalidate.D(),
			StaleIfError:         r.StaleIfError.D(),
			NegativeTTL:          r.NegativeTTL.D(),
			Key:                  keyOptions(r.Key),
			ForwardAll:           r.ForwardHeaders == "all",
			RequestNoCache:       r.RequestNoCache,
			Tags:                 r.Tags,
			Invalidate:           r.Invalidate,
		}
		if r.Freshness == "origin" {
			// nil means the default list: spelled out, so GET /routes
			// shows the fields actually obeyed.
			targets := r.TargetedFields
			if targets == nil {
				targets = slices.Clone(httpcache.DefaultTargets)
			}
			s.Origin = &route.Origin{MaxTTL: r.MaxTTL.D(), Targets: targets}
		}
		if b := r.Batch; b != nil {
			s.Batch = &route.Batch{Path: b.Path, Param: b.Param, IDField: b.IDField, ETagField: b.ETagField, MaxSize: b.MaxSize, MaxWait: b.MaxWait.D(), MaxInFlight: b.MaxInFlight, MaxRouteInFlight: b.MaxRouteInFlight}
		}
		if sp := r.Split; sp != nil {
			s.Split = &route.Split{Param: sp.Param, RouteName: sp.Route, MaxIDs: sp.MaxIDs}
		}
		specs = append(specs, s)
	}
	t, err := route.Compile(specs)
	if err != nil {
		return nil, fmt.Errorf("server: routes: %w", err)
	}
	return t, nil
}

// keyed reports whether a route of the table in force keys on the
// canonical field name (key.headers): the edge drops a client's
// underscore spelling of it (edge.Options.Keyed), which CGI-style
// upstreams read as the same field, so an answer made for a value the key
// does not hold is never stored under it. Read per call: a reload's
// routes count at once. Called only for a request field whose name holds
// '_'.
func (s *Server) keyed(name string) bool {
	for _, rt := range s.proxy.Routes().Routes() {
		if slices.Contains(rt.Key.Headers, name) {
			return true
		}
	}
	return false
}
