package proxy_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkBatchedMissesBio is BenchmarkBatchedMisses on the answer the
// demo upstream (and so bench/miss-vs-hit.sh) sends: compact JSON records
// of about 800 bytes, most of them a bio, on a route tagged as the
// bench's is ("user:{id}"). The per-element work of a bulk answer (its
// split, each element's ETag, entry, key and tags) scales with it, where
// BenchmarkBatchedMisses's 30-byte elements hide it.
// Run: go test -run - -bench BatchedMissesBio -benchmem ./internal/proxy
func BenchmarkBatchedMissesBio(b *testing.B) {
	o := newBulkOrigin(b, func(w http.ResponseWriter, r *http.Request, ids []string) {
		var sb strings.Builder
		sb.WriteByte('[')
		for i, id := range ids {
			if i > 0 {
				sb.WriteByte(',')
			}
			n, _ := strconv.Atoi(id)
			bio := strings.Repeat("lorem ipsum dolor ", 30+n%20)
			fmt.Fprintf(&sb, `{"id":%s,"name":"Ann Smith","email":"ann.%s@users.example.com","version":1,"updated_at":"2024-01-01T00:00:00Z","bio":%q}`, id, id, bio)
		}
		sb.WriteByte(']')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
		_, _ = w.Write([]byte(sb.String()))
	})
	rt := userRoute(100, 2*time.Millisecond)
	rt.Tags = []string{"user:{id}"}
	e := newEnv(b, o.upstream, []testRoute{rt})
	runBatchedMisses(b, e, o, 100000)
}
