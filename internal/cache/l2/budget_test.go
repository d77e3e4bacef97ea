package l2

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/redisbudget"
	"github.com/sidecache/sidecache/internal/redistest"
)

// TestSpentBudgetSendsNothing: once a request's Redis budget is spent,
// every call it would wait on returns ErrBudget without a command, and its
// store is not queued: Redis holds nothing of it afterwards, and the
// breaker stays closed (nothing was asked of Redis).
func TestSpentBudgetSendsNothing(t *testing.T) {
	srv := redistest.Start(t)
	r := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	bg := context.Background()

	ctx := redisbudget.New(bg)
	redisbudget.From(ctx).Spend(r.opts.Timeout)

	if err := r.Set(ctx, "k", entry("v", time.Minute, "t")); !errors.Is(err, ErrBudget) {
		t.Errorf("Set: %v, want ErrBudget", err)
	}
	if _, _, err := r.Get(ctx, "k"); !errors.Is(err, ErrBudget) {
		t.Errorf("Get: %v, want ErrBudget", err)
	}
	if _, err := r.GetMany(ctx, []string{"k", "j"}); !errors.Is(err, ErrBudget) {
		t.Errorf("GetMany: %v, want ErrBudget", err)
	}
	if _, acquired, _, err := r.Lease(ctx, "k", time.Minute); !errors.Is(err, ErrBudget) || acquired {
		t.Errorf("Lease: acquired %v, %v, want ErrBudget", acquired, err)
	}
	if _, _, _, err := r.WaitFill(ctx, "k", time.Second, time.Time{}); !errors.Is(err, ErrBudget) {
		t.Errorf("WaitFill: %v, want ErrBudget", err)
	}
	if err := r.InvalidateTags(ctx, "t"); !errors.Is(err, ErrBudget) {
		t.Errorf("InvalidateTags: %v, want ErrBudget", err)
	}
	if err := r.Delete(ctx, "k"); !errors.Is(err, ErrBudget) {
		t.Errorf("Delete: %v, want ErrBudget", err)
	}
	r.flush(t)
	for _, k := range []string{"test:e:k", "test:l:k", "test:v:t"} {
		if err := rc.Get(bg, k).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("%s in Redis (%v): a call was made on a spent budget", k, err)
		}
	}
	if !r.Up() {
		t.Error("breaker opened")
	}

	// A request's own budget: a fresh one is whole.
	if err := r.Set(bg, "k", entry("v", time.Minute, "t")); err != nil {
		t.Fatal(err)
	}
	r.flush(t)
	if _, ok, err := r.Get(redisbudget.New(bg), "k"); err != nil || !ok {
		t.Fatalf("Get on a fresh budget: %v %v", ok, err)
	}
}

// TestCallCutByBudgetNotCounted: a call whose deadline was the request's
// budget (less than Timeout left) and ran out did not show Redis missing
// Timeout: the breaker does not count it, however many there are. A call
// with the whole Timeout that runs out still counts (outage_test.go).
func TestCallCutByBudgetNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	r := newReplica(t, []string{srv.Addr()}, func(o *Options) { o.Timeout = time.Second })
	rc := raw(t, srv.Addr())
	bg := context.Background()
	if err := rc.Do(bg, "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 * r.opts.FailureThreshold {
		ctx := redisbudget.New(bg)
		redisbudget.From(ctx).Spend(r.opts.Timeout - 30*time.Millisecond)
		if _, _, err := r.Get(ctx, "k"); err == nil {
			t.Fatalf("Get %d on a paused Redis answered", i)
		}
	}
	if !r.Up() {
		t.Fatal("the breaker opened on calls cut by their requests' budgets")
	}
}

// TestLeaseWaitPollsNotCharged: a lease wait's polls wait on another
// replica's upstream fetch, not on Redis, so they charge nothing to the
// request's budget; before, a few hundred quick polls spent it and the
// waiter fetched on its own, the upstream call the lease exists to save.
func TestLeaseWaitPollsNotCharged(t *testing.T) {
	srv := redistest.Start(t)
	holder := newReplica(t, []string{srv.Addr()})
	waiter := newReplica(t, []string{srv.Addr()})
	bg := context.Background()
	if _, acquired, _, err := holder.Lease(bg, "k", time.Minute); err != nil || !acquired {
		t.Fatalf("holder's lease: acquired %v, %v", acquired, err)
	}
	ctx := redisbudget.New(bg)
	_, found, lapsed, err := waiter.WaitFill(ctx, "k", 200*time.Millisecond, time.Time{})
	if err != nil || found || lapsed {
		t.Fatalf("WaitFill on a held lease, no fill: found %v lapsed %v %v, want a plain miss", found, lapsed, err)
	}
	if spent := redisbudget.From(ctx).Spent(); spent != 0 {
		t.Fatalf("the wait's polls charged %v to the request's budget, want 0", spent)
	}
}
