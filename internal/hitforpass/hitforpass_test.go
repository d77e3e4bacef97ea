package hitforpass

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A Set holds keys from requests: a flood of distinct long keys must
// stay within its byte budget, forgetting the oldest first.
func TestHitForPassFloodStaysWithinBudget(t *testing.T) {
	var p Set
	now := time.Now()
	until := now.Add(time.Minute)
	pad := strings.Repeat("q", 4<<10)
	const n = 10000 // 40 MB of keys
	key := func(i int) string { return fmt.Sprintf("GET h /big?q=%s%d", pad, i) }
	for i := range n {
		p.Add(key(i), until)
	}
	if p.bytes > maxBytes {
		t.Fatalf("charged %d B, over the budget of %d B", p.bytes, maxBytes)
	}
	var held int64
	p.m.Range(func(k, _ any) bool {
		held += int64(len(k.(string)))
		return true
	})
	if held > maxBytes {
		t.Fatalf("holds %d B of keys, over the budget of %d B", held, maxBytes)
	}
	if len(p.order) > 2*p.live+64 {
		t.Fatalf("order holds %d refs for %d keys", len(p.order), p.live)
	}
	if !p.Active(key(n-1), now) {
		t.Fatal("the newest key was forgotten")
	}
	if p.Active(key(0), now) {
		t.Fatal("the oldest key is still held past the budget")
	}
}

// Adding the same keys again and again, and letting them expire, neither
// grows the bookkeeping nor leaves expired keys counted.
func TestHitForPassReAddAndExpiry(t *testing.T) {
	var p Set
	now := time.Now()
	for i := range 100000 {
		p.Add(fmt.Sprintf("k%d", i%10), now.Add(time.Second))
	}
	if p.live != 10 || len(p.order) > 2*10+64 {
		t.Fatalf("live %d, order %d after re-adding 10 keys: want 10 and at most %d", p.live, len(p.order), 2*10+64)
	}
	if !p.Active("k3", now) {
		t.Fatal("k3 not active within its window")
	}
	for i := range 10 {
		if p.Active(fmt.Sprintf("k%d", i), now.Add(2*time.Second)) {
			t.Fatalf("k%d active after its window", i)
		}
	}
	if p.live != 0 || p.bytes != 0 {
		t.Fatalf("live %d, bytes %d after every key expired: want 0, 0", p.live, p.bytes)
	}
}
