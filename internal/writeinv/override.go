package writeinv

import (
	"net/http"
	"slices"

	"github.com/sidecache/sidecache/internal/httpcache"
	"github.com/sidecache/sidecache/internal/route"
)

// The method an app applies. Routes list methods exactly, but frameworks
// apply a request as a method other than the one on its request line:
//
//   - a POST's _method parameter: Rails (Rack::MethodOverride), Laravel,
//     Symfony and Spring's HiddenHttpMethodFilter read it from the form
//     body, which the sidecar streams unread; Laravel and Symfony from the
//     query too. Every HTML form that edits or deletes in those frameworks
//     is such a POST;
//   - a method override field (httpcache.Overridden: X-HTTP-Method-Override
//     and its kin), read on a POST by Express's method-override and
//     ASP.NET Core.
//
// A write matched by its request line alone dropped its target URI but
// not the invalidate tags of the write route its path names, so an entry
// of another URI carrying them (a /clients/5/summary tagged client:5)
// outlived an acknowledged write. Lenient for invalidation: a POST is
// matched under every method the table's invalidate routes take (its
// body may name any), a request under the methods its override fields
// name. A POST that creates costs at most the entries a write to its path
// would drop. (A safe method with an override field never gets here: the
// proxy refuses it, since an app may take it for a write and the sidecar
// for a read. Nor does a method in another case than its registered one,
// "patch", which Werkzeug and ASP.NET Core apply as PATCH: the proxy
// refuses it too, httpcache.MisspelledMethod.)

// methods are the methods r's path is matched under: r's own, the table's
// invalidate routes' methods that r's override fields name, and all of
// those for a POST.
func methods(t *route.Table, r *http.Request) []string {
	ms := []string{r.Method}
	post := r.Method == http.MethodPost
	if !post && !httpcache.Overridden(r.Header) {
		return ms
	}
	for _, rt := range t.Routes() {
		if len(rt.Invalidate) == 0 {
			continue
		}
		for _, m := range rt.Methods {
			if !slices.Contains(ms, m) && (post || httpcache.OverrideNames(r.Header, m)) {
				ms = append(ms, m)
			}
		}
	}
	return ms
}
