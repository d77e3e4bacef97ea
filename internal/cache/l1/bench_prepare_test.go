package l1

import (
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/cache"
)

// BenchmarkPrepareBulk is what SetMany works out per entry of one bulk
// answer before it takes mu (prepare): the entries share one header map
// and their route's tag, as the proxy's elements do. An op is one entry.
//
//	go test -run - -bench PrepareBulk -benchmem ./internal/cache/l1
func BenchmarkPrepareBulk(b *testing.B) {
	s := newStore(b, Options{MaxBytes: 256 << 20})
	keys, entries := batchedMissEntries(bulkIDs, func(id string) string { return `{"id":` + id + `}` })
	shared := entries[0].Header
	shared["Cache-Control"] = []string{"max-age=300"}
	shared["Date"] = []string{"Thu, 26 Nov 2026 16:00:00 GMT"}
	for _, e := range entries {
		e.Header = shared
		e.SetETag([]string{`"0123456789abcdef0123456789abcdef0123456789a"`})
	}
	now := time.Now()
	var m bulkMemo
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.prepare(s, keys, entries, i%bulkIDs, now)
		i++
	}
}

// bulkMemo is what prepareBulk carries from one entry of a bulk answer to
// the next, as SetMany does.
type bulkMemo struct {
	size sizeMemo
	prev *item
}

// prepare prepares entry j of a bulk answer as SetMany does.
func (m *bulkMemo) prepare(s *Store, keys []string, entries []*cache.Entry, j int, now time.Time) {
	if j == 0 {
		m.prev = nil
	}
	e := entries[j]
	m.prev, _ = s.prepareLike(keys[j], e, now, m.size.of(e.Header), m.prev)
}
