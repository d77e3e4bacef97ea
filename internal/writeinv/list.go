package writeinv

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sidecache/sidecache/internal/route"
	"github.com/sidecache/sidecache/internal/spelling"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// Bulk writes. A list endpoint names per-ID resources in a query
// parameter (route.List): a split route's path — GET /users?ids=1,2 is
// answered per id from the user route's cache — and a batch route's bulk
// path. The config already says that ?ids=1,2 there names users 1 and 2,
// so a write to it (DELETE /users?ids=1,2, PATCH /users?ids=1,2) changed
// each: it drops, for every id, what a write to the id's own path
// (/users/1) would — that path's URI tags, and the invalidate tags of the
// write routes it matches under the write's methods — and the tags of the
// route that stores that path, which a per-ID write route need not name
// (the split or batch config is the operator's word that the id is that
// route's). Dropping the list's own URI alone left /users/1, and every
// split list's element of it, serving the version the write replaced until
// its ttl: an NGINX or Varnish operator who bans on a bulk write expects
// no such lie behind it. Over-invalidation costs a miss.
//
// Lenient, as a path is: the ids are read as the stacks that serve list
// endpoints read them — every value of the parameter (ids=1&ids=2: Rails,
// Spring, Express), of its array forms ids[]=1 and ids[0]=1 (Rails, PHP,
// qs), under any case of its name (ASP.NET Core binds without case), with
// pairs separated by ';' as well as '&' (Rack before 3, Python before
// 3.10), each value split at commas, blanks around an id trimmed, empty
// ids skipped — and each id is spelled as a path id is
// (spelling.Candidates of its per-ID path: "05", "0x5", "5-acme").
//
// Bounded: at most route.List.MaxIDs distinct ids (split.max_ids; at least
// route.DefaultSplitMaxIDs), and at most spellingsPerID spellings of their
// paths on average. A write past either is refused unsent (TooManyIDs),
// as a split list of too many ids is, and for the reason a path of too
// many spellings is (TooManySpellings): its invalidation cannot be listed
// within the bound, and no other is complete — a purge of the per-ID
// route would miss the other routes' entries carrying its tags
// (/users/1/summary tagged user:1, an upstream's Surrogate-Key), a purge
// of everything would hand every writer a cache flush.

// spellingsPerID is the average number of spellings (spelling.Candidates)
// a bulk write's ids may read as: an id reads as itself, or with its
// canonical and folded forms, or as a few integers ("0x5": 0 and 5).
const spellingsPerID = 4

// addLists adds the invalidation of the ids r's query names, when one of
// cands (r's path spelled every way, under methods ms) is a list
// endpoint.
func (p *Plan) addLists(params route.Params, cands, ms []string) {
	var lists []route.List
	for _, path := range cands {
		lists = p.o.Table.AppendLists(lists, path)
	}
	if len(lists) == 0 {
		return
	}
	for _, l := range lists {
		ids, ok := listIDs(p.r.URL.RawQuery, l.Param, l.MaxIDs)
		if !ok {
			p.overIDs, p.maxIDs = true, l.MaxIDs
			return
		}
		spelled := 0
		for _, id := range ids {
			path := l.Target.PathFor(l.Target.Batch.IDParam, id)
			idCands, ok := spelling.Candidates(path)
			if spelled += len(idCands); !ok || spelled > spellingsPerID*l.MaxIDs {
				p.overIDs, p.maxIDs = true, l.MaxIDs
				return
			}
			params = p.addWriteRoutes(params, idCands, ms)
			params = p.addReadTags(params, idCands)
			var buf [4]string // each id's own: addTag's look-up stays short
			p.ids = append(p.ids, surrogate.AppendPathTags(buf[:0], path, p.stored)...)
		}
		if len(ids) > 0 {
			p.addRoute(l.Target.Name)
		}
	}
	slices.Sort(p.ids)
	p.ids = slices.Compact(p.ids)
}

// addReadTags adds the tags of the cacheable route each of cands, a per-ID
// path's spellings, is read through: those its entries carry.
func (p *Plan) addReadTags(params route.Params, cands []string) route.Params {
	for _, path := range cands {
		for _, m := range [...]string{http.MethodGet, http.MethodHead} {
			rt, ps, ok := p.o.Table.MatchAppend(params[:0], m, path)
			if !ok || !rt.Cacheable() {
				continue
			}
			params = ps
			p.addTags(rt.Tags, ps)
		}
	}
	return params
}

// TooManyIDs reports whether the write names more ids of a list endpoint
// than its bound allows (MaxIDs), or ids that read as more spellings than
// spellingsPerID each on average: the caller refuses it unsent (list.go).
func (p *Plan) TooManyIDs() bool { return p.overIDs }

// MaxIDs is the bound TooManyIDs found exceeded, for the caller's answer.
func (p *Plan) MaxIDs() int { return p.maxIDs }

// listIDs are the distinct ids raw, a request's query, names in param
// (leniently: see above), and false once they are more than maxIDs.
func listIDs(raw, param string, maxIDs int) ([]string, bool) {
	var ids []string
	seen := map[string]struct{}{}
	for raw != "" {
		var pair string
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			pair, raw = raw[:i], raw[i+1:]
		} else {
			pair, raw = raw, ""
		}
		k, v, _ := strings.Cut(pair, "=")
		if !names(unescape(k), param) {
			continue
		}
		for id := range strings.SplitSeq(unescape(v), ",") {
			id = strings.TrimSpace(id)
			if _, dup := seen[id]; id == "" || dup {
				continue
			}
			if len(ids) == maxIDs {
				return nil, false
			}
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	return ids, true
}

// names reports whether k, a query parameter's decoded name, is param or
// one of its array forms (param[], param[N]), in any case.
func names(k, param string) bool {
	if len(k) < len(param) || !strings.EqualFold(k[:len(param)], param) {
		return false
	}
	rest := k[len(param):]
	return rest == "" || len(rest) >= 2 && rest[0] == '[' && rest[len(rest)-1] == ']' && !strings.ContainsAny(rest[1:len(rest)-1], "[]")
}

// unescape decodes a query component; one that is not valid
// percent-encoding is read as sent, as stacks that do not refuse it do.
func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}
