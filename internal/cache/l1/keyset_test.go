package l1

import (
	"slices"
	"testing"
)

// keySet holds the same keys a map would, through the switch from its
// inline key to a map and back down to none.
func TestKeySet(t *testing.T) {
	var k keySet
	want := map[string]bool{}
	check := func(step string) {
		t.Helper()
		got := k.list()
		slices.Sort(got)
		var w []string
		for key := range want {
			w = append(w, key)
		}
		slices.Sort(w)
		if !slices.Equal(got, w) || k.empty() != (len(w) == 0) {
			t.Fatalf("%s: keys %q (empty %v), want %q", step, got, k.empty(), w)
		}
	}
	check("zero")
	for _, op := range []struct {
		add bool
		key string
	}{{true, "a"}, {true, "a"}, {false, "b"}, {false, "a"}, {true, "b"}, {true, "c"}, {true, "b"}, {false, "b"}, {false, "c"}, {true, "d"}, {false, "d"}} {
		if op.add {
			k.add(op.key)
			want[op.key] = true
		} else {
			k.remove(op.key)
			delete(want, op.key)
		}
		check(map[bool]string{true: "add ", false: "remove "}[op.add] + op.key)
	}
}
