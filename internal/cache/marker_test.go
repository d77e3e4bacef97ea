package cache

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

// A variants marker lives exactly as long as the variant it points to,
// carries its tags (so invalidation finds it), and holds no response.
func TestEntryMarker(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		e     *Entry
		names []string
		want  *Entry
	}{
		{"every lifetime field",
			&Entry{Status: 200, Header: http.Header{"Vary": {"Accept"}}, Body: []byte("x"), StoredAt: at,
				TTL: time.Minute, StaleWhileRevalidate: 2 * time.Second, StaleIfError: 3 * time.Second,
				InitialAge: 4 * time.Second, Keep: 5 * time.Second, NoStale: true, Tags: []string{"_route:r", "t"}},
			[]string{"Accept"},
			&Entry{Variants: []string{"Accept"}, StoredAt: at, TTL: time.Minute, StaleWhileRevalidate: 2 * time.Second,
				StaleIfError: 3 * time.Second, InitialAge: 4 * time.Second, Keep: 5 * time.Second, Tags: []string{"_route:r", "t"}}},
		{"bare", &Entry{Status: 404, StoredAt: at}, []string{"Accept-Encoding", "X-A"},
			&Entry{Variants: []string{"Accept-Encoding", "X-A"}, StoredAt: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.e.Marker(tt.names)
			if !reflect.DeepEqual(m, tt.want) {
				t.Errorf("got %+v\nwant %+v", m, tt.want)
			}
			if !m.IsVariants() || m.Lifetime() != tt.e.Lifetime() {
				t.Errorf("IsVariants %v, Lifetime %v (entry %v)", m.IsVariants(), m.Lifetime(), tt.e.Lifetime())
			}
		})
	}
}
