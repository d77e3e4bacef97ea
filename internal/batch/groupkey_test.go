package batch

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// Two different groups never get one key: short ones are their own key,
// long ones differing only past the hashed limit get different hashes,
// and a short group spelling a long one's hash does not meet it.
func TestKeyOfNeverMerges(t *testing.T) {
	long := strings.Repeat("h", maxGroupKey)
	sum := sha256.Sum256([]byte(long + "x"))
	groups := []string{
		"", "g1", "g2", long, long + "x", long + "y",
		string(sum[:]), // 32 bytes: kept as is, never taken for long+"x"'s hash
	}
	seen := map[groupKey]string{}
	for _, g := range groups {
		k := keyOf(g)
		if other, dup := seen[k]; dup {
			t.Fatalf("groups %q and %q share a key", other, g)
		}
		seen[k] = g
		if keyOf(g) != k {
			t.Fatalf("group %q keyed two ways", g)
		}
		if k.hashed != (len(g) > maxGroupKey) {
			t.Errorf("group of %d bytes hashed=%v", len(g), k.hashed)
		}
	}
}
