package l2

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// Issue 20 item 6: a tag that is not UTF-8 (PUT /items/caf%E9) reaches a
// peer byte for byte, next to UTF-8 ones. On 16d946c the JSON message
// turned \xe9 into U+FFFD and the peer dropped a tag nobody carries.
func TestInvalidationTagsReachPeersLosslessly(t *testing.T) {
	rs := redistest.Start(t)
	a := newReplica(t, []string{rs.Addr()})
	b := newReplica(t, []string{rs.Addr()})
	tags := []string{"_uri:/items/caf\xe9", "item:caf\xe9", "item:café", "plain", "\xff\xfe"}
	if err := a.InvalidateTags(context.Background(), tags...); err != nil {
		t.Fatal(err)
	}
	got := b.nextInvalidation(t, 5*time.Second)
	if !sameSet(got.Tags, tags) {
		t.Fatalf("peer got tags %q, want %q", got.Tags, tags)
	}
}

// A message from a replica of the previous release (no tags64) reads as
// before, and one of this release keeps every UTF-8 tag where the
// previous release reads it.
func TestInvalidationWireCompatible(t *testing.T) {
	var old Invalidation
	if err := json.Unmarshal([]byte(`{"tags":["a","b"],"origin":"x"}`), &old); err != nil {
		t.Fatal(err)
	}
	if got := decodeWire(old); !slices.Equal(got.Tags, []string{"a", "b"}) {
		t.Fatalf("old message read as %q", got.Tags)
	}
	b, _ := json.Marshal(encodeWire(Invalidation{Tags: []string{"a", "caf\xe9", "b"}}))
	var prev struct {
		Tags []string `json:"tags"`
	}
	if err := json.Unmarshal(b, &prev); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prev.Tags, []string{"a", "b"}) {
		t.Fatalf("the previous release reads tags %q from %s", prev.Tags, b)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
