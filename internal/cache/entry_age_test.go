package cache

import (
	"testing"
	"time"
)

// The age an entry arrived with counts toward its freshness and its
// lifetime in the tiers (RFC 9111 §4.2.3); Keep lengthens the lifetime.
func TestEntryInitialAgeAndKeep(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &Entry{Status: 200, StoredAt: at, TTL: time.Minute, InitialAge: 50 * time.Second, Keep: 10 * time.Minute}
	now := at.Add(5 * time.Second)
	if got := e.Age(now); got != 55*time.Second {
		t.Errorf("Age = %v, want 55s", got)
	}
	if !e.Fresh(now) || e.Fresh(at.Add(10*time.Second)) {
		t.Error("freshness does not count the initial age")
	}
	if got := e.Remaining(now); got != 11*time.Minute-55*time.Second {
		t.Errorf("Remaining = %v", got)
	}
}
