package l1

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The tag lists name exactly the keys a plain tag → keys map would, and
// DeleteTags counts and drops exactly those, through random writes (with
// 0 to 6 tags, repeats included, across every allocation shape of an
// item), rewrites under other tags, deletes, tag deletes and clears; also
// when keys and tags collide in the index's hash (narrowed to 2 bits),
// where a Set retires the live key that shares its hash.
func TestTagListsMatchModel(t *testing.T) {
	t.Parallel()
	for _, mask := range []uint64{^uint64(0), 3} {
		t.Run(fmt.Sprintf("mask %x", mask), func(t *testing.T) {
			t.Parallel()
			testTagListsMatchModel(t, mask)
		})
	}
}

func testTagListsMatchModel(t *testing.T, mask uint64) {
	s := newStore(t, Options{MaxBytes: 1 << 30})
	s.hashMask = mask
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(23, 1))
	tagNames := []string{"_route:a", "_route:b", "u:1", "u:2", "u:3", "uri:/x", "uri:/y", "k"}
	model := map[string][]string{} // key → its tags
	under := func(tag string) []string {
		var keys []string
		for k, tags := range model {
			if slices.Contains(tags, tag) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		return keys
	}
	for step := range 4000 {
		key := fmt.Sprintf("k%d", rng.IntN(40))
		switch op := rng.IntN(20); {
		case op < 14:
			tags := make([]string, rng.IntN(7))
			for i := range tags {
				tags[i] = tagNames[rng.IntN(len(tagNames))]
			}
			// Waited for: two unapplied writes of one key make ristretto
			// refuse the second, which the model would not know.
			err := s.Set(ctx, key, entry("v", time.Hour, tags...))
			s.Wait()
			for k := range model {
				if k != key && s.hash(k) == s.hash(key) {
					delete(model, k) // one live key per hash
				}
			}
			if err != nil {
				delete(model, key) // the old entry is dropped either way
			} else {
				model[key] = tags
			}
		case op < 16:
			_ = s.Delete(ctx, key)
			delete(model, key)
		case op < 19:
			tags := []string{tagNames[rng.IntN(len(tagNames))], tagNames[rng.IntN(len(tagNames))]}
			want := map[string]bool{}
			for _, tag := range tags {
				for _, k := range under(tag) {
					want[k] = true
				}
			}
			if n := s.DeleteTags(tags...); n != len(want) {
				t.Fatalf("step %d: DeleteTags(%q) = %d, want %d", step, tags, n, len(want))
			}
			for k := range want {
				delete(model, k)
			}
		default:
			if rng.IntN(10) == 0 {
				s.Clear()
				clear(model)
			}
		}
		for _, tag := range tagNames {
			want := under(tag)
			got, more := s.KeysWithTag(tag, 1000)
			if more || !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("step %d: KeysWithTag(%q) = %q (more %v), want %q", step, tag, got, more, want)
			}
		}
		for k := range 40 {
			key := fmt.Sprintf("k%d", k)
			if _, live := model[key]; (get(t, s, key) != nil) != live {
				t.Fatalf("step %d: Get(%q) hit = %v, want %v", step, key, !live, live)
			}
		}
		if step%500 == 0 {
			checkIndex(t, s)
		}
	}
	checkIndex(t, s)
}
