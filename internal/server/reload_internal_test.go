package server

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sidecache/sidecache/internal/config"
)

// TestChangedFieldsNamesYAMLPaths: a restart-only change is reported by the
// path an operator writes in the file, down into pointers (cache.l2).
func TestChangedFieldsNamesYAMLPaths(t *testing.T) {
	load := func(extra string) *config.Config {
		c, err := config.Parse([]byte(`
listen: 127.0.0.1:8080
upstream: {url: "http://127.0.0.1:3000"}
`+extra), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := load("cache: {l2: {redis: {addrs: [a:1]}}}\n")
	b := load("cache: {l2: {redis: {addrs: [b:1], password: x}}}\nserver: {read_timeout: 5s}\n")
	b.Listen = "127.0.0.1:8081"
	got := changedFields(reflect.ValueOf(*a), reflect.ValueOf(*b), "")
	want := []string{"listen", "server.read_timeout", "cache.l2.redis.addrs", "cache.l2.redis.password"}
	if !slices.Equal(got, want) {
		t.Errorf("changedFields = %q, want %q", got, want)
	}
	if got := changedFields(reflect.ValueOf(*a), reflect.ValueOf(*load("")), ""); !slices.Equal(got, []string{"cache.l2"}) {
		t.Errorf("l2 removed: %q, want [cache.l2]", got)
	}
	if got := changedFields(reflect.ValueOf(*a), reflect.ValueOf(*a), ""); got != nil {
		t.Errorf("no change: %q", got)
	}
}
