package mix_test

import (
	"testing"

	"github.com/sidecache/sidecache/internal/invariant/mix"
)

func TestParseMix(t *testing.T) {
	m, unknown := mix.ParseMix("all,-hangup,+nope")
	if len(unknown) != 1 || unknown[0] != "nope" {
		t.Fatalf("unknown = %v", unknown)
	}
	for _, f := range mix.Features {
		if want := f.Name != "hangup"; m.Has(f.Name) != want {
			t.Errorf("%s: %v, want %v", f.Name, m.Has(f.Name), want)
		}
		if !f.On && f.Gate == "" && !f.Heavy {
			t.Errorf("%s is off with no gate naming the item it waits for, and is not heavy", f.Name)
		}
		if f.Note == "" {
			t.Errorf("%s has no note", f.Name)
		}
	}
}
