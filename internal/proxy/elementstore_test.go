package proxy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/proxy"
	"github.com/sidecache/sidecache/internal/surrogate"
)

// The elements of a bulk answer are written together after the split
// (storeElements): one that L1 refuses (larger than l1.max_bytes) is
// answered but neither reported stored (Cache-Status) nor kept, and is
// counted as not stored (uncacheable), while the others of the same answer
// are stored and then served from L1.
func TestBatchElementRefusedByL1(t *testing.T) {
	t.Parallel()
	const big = "9"
	pad := strings.Repeat("x", 128<<10)
	o := newBulkOrigin(t, func(w http.ResponseWriter, r *http.Request, ids []string) {
		var elems []string
		for _, id := range ids {
			if id == big {
				elems = append(elems, `{"id":`+id+`,"pad":"`+pad+`"}`)
			} else {
				elems = append(elems, userJSON(id, nil))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "["+strings.Join(elems, ",")+"]")
	})
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, 50*time.Millisecond)}, func(po *proxy.Options, _ *l1.Store) {
		small, err := l1.New(l1.Options{MaxBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(small.Close)
		po.Cache = cache.NewTiered(small, nil, cache.TieredOptions{})
	})
	paths := []string{"/users/1", "/users/2", "/users/3", "/users/" + big, "/users/4"}
	for i, a := range fetchAll(e, paths, nil) {
		id := strings.TrimPrefix(paths[i], "/users/")
		if a.err != nil || a.code != http.StatusOK || !strings.HasPrefix(a.body, `{"id":`+id) {
			t.Fatalf("%s: %d %.40q %v", paths[i], a.code, a.body, a.err)
		}
		if stored := strings.Contains(a.header.Get("Cache-Status"), "stored"); stored != (id != big) {
			t.Errorf("%s: Cache-Status %q, want stored %v", paths[i], a.header.Get("Cache-Status"), id != big)
		}
	}
	if n := notStoredCount(t, e.reg, "uncacheable"); n != 1 {
		t.Errorf("sidecache_batch_not_stored_total{reason=uncacheable} = %v, want 1", n)
	}
	calls := len(o.snapshot())
	for _, p := range paths {
		if a := fetch(t.Context(), e.front.URL+p, nil); a.err != nil || a.code != http.StatusOK {
			t.Fatalf("again %s: %d %v", p, a.code, a.err)
		}
	}
	if got := o.snapshot()[calls:]; len(got) != 1 || len(got[0].ids) != 1 || got[0].ids[0] != big {
		t.Errorf("asked again, the sidecar made bulk calls %v, want one for %s alone", got, big)
	}
}

// invalidatingCache is the tiers with an invalidation of tags arriving
// after the elements of a bulk answer were admitted and before they are
// written (as a peer's may): its SetMany adds the tombstones first.
type invalidatingCache struct {
	*cache.Tiered
	h    **proxy.Handler
	tags []string
}

func (c invalidatingCache) SetMany(ctx context.Context, keys []string, es []*cache.Entry, errs []error, keep func(*cache.Entry) bool) {
	(*c.h).Invalidated(c.tags...)
	c.Tiered.SetMany(ctx, keys, es, errs, keep)
}

// An element whose tag is invalidated between its admission and the write
// of the bulk answer's elements (storeElements) is answered but neither
// stored nor reported stored: the write asks the tombstones again.
func TestBatchElementInvalidatedBeforeWrite(t *testing.T) {
	t.Parallel()
	o := newBulkOrigin(t, nil)
	var h *proxy.Handler
	e := newEnv(t, o.upstream, []testRoute{userRoute(100, 50*time.Millisecond)}, func(po *proxy.Options, _ *l1.Store) {
		po.Cache = invalidatingCache{Tiered: po.Cache.(*cache.Tiered), h: &h, tags: []string{surrogate.URITagPrefix + "/users/2"}}
	})
	h = e.h
	paths := []string{"/users/1", "/users/2", "/users/3"}
	for i, a := range fetchAll(e, paths, nil) {
		if a.err != nil || a.code != http.StatusOK {
			t.Fatalf("%s: %d %v", paths[i], a.code, a.err)
		}
		if stored := strings.Contains(a.header.Get("Cache-Status"), "stored"); stored != (paths[i] != "/users/2") {
			t.Errorf("%s: Cache-Status %q", paths[i], a.header.Get("Cache-Status"))
		}
	}
	calls := len(o.snapshot())
	for _, p := range []string{"/users/1", "/users/3"} {
		if a := fetch(t.Context(), e.front.URL+p, nil); a.err != nil || a.code != http.StatusOK {
			t.Fatalf("again %s: %d %v", p, a.code, a.err)
		}
	}
	if got := o.snapshot()[calls:]; len(got) != 0 {
		t.Errorf("users 1 and 3 asked again made bulk calls %v, want none (stored)", got)
	}
}
