package route

import (
	"strings"

	"github.com/sidecache/sidecache/internal/spelling"
)

// A List is a list endpoint: a path whose query parameter Param names
// resources of the per-ID route Target by id. The config says so twice: a
// split route's path (GET /users?ids=1,2 is answered per id from its
// target's cache) and a batch route's bulk path (the upstream's
// GET /users?ids=1,2 answers the batch route's ids). A write to that path
// naming ids (DELETE /users?ids=1,2) changes those resources
// (internal/writeinv).
type List struct {
	Param  string
	Target *Route
	// MaxIDs bounds the distinct ids a write to the endpoint may name:
	// the largest split.max_ids of the split routes on the path, and at
	// least DefaultSplitMaxIDs for a batch's bulk path, whose batch.max_size
	// bounds the sidecar's own calls, not what the app's endpoint takes.
	MaxIDs int
}

// AppendLists appends to dst the list endpoints path is, whatever the
// methods of the routes that say so (a split route takes GET alone, a
// bulk path no route at all), each (Param, Target) once. path is matched
// as given: the caller tries each of its spellings (spelling.Candidates),
// and a bulk path as configured or folded (spelling.Fold) matches.
func (t *Table) AppendLists(dst []List, path string) []List {
	var scratch [4]Param
	for _, r := range t.routes {
		switch {
		case r.Split != nil && r.Split.Route != nil:
			if _, ok := r.pat.match(path, scratch[:0]); ok {
				dst = addList(dst, List{Param: r.Split.Param, Target: r.Split.Route, MaxIDs: splitMax(r.Split)})
			}
		case r.Batch != nil:
			bp, _, _ := strings.Cut(r.Batch.Path, "?")
			if path == bp || path == spelling.Fold(bp) {
				dst = addList(dst, List{Param: r.Batch.Param, Target: r, MaxIDs: DefaultSplitMaxIDs})
			}
		}
	}
	return dst
}

func splitMax(s *Split) int {
	if s.MaxIDs <= 0 {
		return DefaultSplitMaxIDs
	}
	return s.MaxIDs
}

// addList adds l to ls, or raises the bound of the entry it repeats.
func addList(ls []List, l List) []List {
	for i := range ls {
		if ls[i].Param == l.Param && ls[i].Target == l.Target {
			ls[i].MaxIDs = max(ls[i].MaxIDs, l.MaxIDs)
			return ls
		}
	}
	return append(ls, l)
}
