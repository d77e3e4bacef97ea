package l2

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/redistest"
)

// A lease whose holder is gone lapses within LeaseHold, not its ttl (an
// hour here), and the waiter is told it may take the lease over: before
// leases were renewed, every case below left the waiter waiting for the
// ttl (here: until its context ended).
func TestLeaseLapsesWithoutHolder(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	hold := func(o *Options) { o.LeaseHold = 300 * time.Millisecond }
	waiter := newReplica(t, []string{srv.Addr()}, hold)
	ctx := context.Background()

	cases := []struct {
		name string
		tune func(*Options)
		// lose makes the lease lose its holder while the holder's
		// upstream fetch would still run.
		lose func(t *testing.T, holder *replica, leaseKey string, release func(time.Duration))
	}{
		{
			// The process dies: no release, no more renewals.
			name: "holder killed",
			lose: func(t *testing.T, holder *replica, _ string, _ func(time.Duration)) { _ = holder.Close() },
		},
		{
			// maxmemory evicts the lease key (or a failover loses it).
			name: "lease key evicted",
			lose: func(t *testing.T, _ *replica, leaseKey string, _ func(time.Duration)) {
				if err := rc.Del(ctx, leaseKey).Err(); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// The holder finishes without a fill while Redis is paused
			// for writes: its queued release times out and is lost.
			name: "release swallowed by CLIENT PAUSE WRITE",
			tune: func(o *Options) { o.Timeout = 200 * time.Millisecond },
			lose: func(t *testing.T, holder *replica, _ string, release func(time.Duration)) {
				if err := rc.Do(ctx, "CLIENT", "PAUSE", "1500", "WRITE").Err(); err != nil {
					t.Fatal(err)
				}
				release(0)
				holder.flush(t) // returns once the writer's attempt failed
			},
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "k" + strconv.Itoa(i)
			holder := newReplica(t, []string{srv.Addr()}, hold, func(o *Options) {
				if c.tune != nil {
					c.tune(o)
				}
			})
			holder.waitUp(t)
			release, ok, _, err := holder.Lease(ctx, key, time.Hour)
			if err != nil || !ok {
				t.Fatalf("Lease = %v, %v", ok, err)
			}
			c.lose(t, holder, "test:l:"+key, release)

			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			e, found, lapsed, err := waiter.WaitFill(wctx, key, time.Hour, time.Time{})
			if err != nil || found || !lapsed {
				t.Fatalf("WaitFill = %v, found %v, lapsed %v, %v; want lapsed", e, found, lapsed, err)
			}

			// The waiter takes over; the former holder can neither end
			// nor extend the new lease.
			takeover, ok, _, err := waiter.Lease(ctx, key, time.Hour)
			if err != nil || !ok {
				t.Fatalf("takeover Lease = %v, %v", ok, err)
			}
			defer takeover(0)
			token, _ := rc.Get(ctx, "test:l:"+key).Result()
			release(0)
			if !holder.closed.Load() {
				eventually(t, 10*time.Second, func() error { return holder.Flush(ctx) })
			}
			if v, _ := rc.Get(ctx, "test:l:"+key).Result(); v != token {
				t.Fatalf("after the former holder's release the lease holds %q, want the new holder's %q", v, token)
			}
		})
	}
}

// A live holder keeps its lease for as long as its fetch runs, however
// many lease holds that is: renewals, not the first PX, keep it.
func TestLeaseRenewedWhileHolderWorks(t *testing.T) {
	srv := redistest.Start(t)
	// A lease lapses, by design, when no renewal reaches Redis for a hold:
	// a holder stalled that long is taken for dead. This test's process
	// (-race, a niced Redis, two shared busy cores) has been stalled for
	// the 2/3 s a one-second hold left between renewals; three seconds
	// leave two.
	const hold = 3 * time.Second
	short := func(o *Options) { o.LeaseHold = hold }
	holder := newReplica(t, []string{srv.Addr()}, short)
	waiter := newReplica(t, []string{srv.Addr()}, short)
	ctx := context.Background()

	acquired := time.Now()
	release, ok, _, err := holder.Lease(ctx, "k", time.Hour)
	if err != nil || !ok {
		t.Fatalf("Lease = %v, %v", ok, err)
	}
	rc := raw(t, srv.Addr())
	token, err := rc.Get(ctx, holder.leaseKey("k")).Result()
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		body          string
		found, lapsed bool
		err           error
	}
	done := make(chan result, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		e, found, lapsed, err := waiter.WaitFill(wctx, "k", time.Hour, time.Time{})
		r := result{found: found, lapsed: lapsed, err: err}
		if e != nil {
			r.body = string(e.Body)
		}
		done <- r
	}()
	// The holder's upstream fetch outlasts the hold the lease was taken
	// for: past it only renewals keep the key, which holds the holder's
	// token throughout.
	for time.Since(acquired) < hold*3/2 {
		if got, err := rc.Get(ctx, holder.leaseKey("k")).Result(); got != token {
			t.Fatalf("lease key = %q, %v after %v, want the holder's token", got, err, time.Since(acquired))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok, _, _ := waiter.Lease(ctx, "k", time.Hour); ok {
		t.Fatal("a second replica acquired the lease while its holder worked")
	}
	if err := holder.Set(ctx, "k", entry("fresh", time.Minute)); err != nil {
		t.Fatal(err)
	}
	release(0)
	if r := <-done; r.err != nil || !r.found || r.lapsed || r.body != "fresh" {
		t.Fatalf("WaitFill = %+v, want the holder's fill", r)
	}
}

// Renewals never keep a lease past the ttl it was taken for (lease_ttl):
// a holder stuck in its fetch frees the key then at the latest.
func TestLeaseNeverOutlivesTTL(t *testing.T) {
	srv := redistest.Start(t)
	short := func(o *Options) { o.LeaseHold = 100 * time.Millisecond }
	holder := newReplica(t, []string{srv.Addr()}, short)
	other := newReplica(t, []string{srv.Addr()}, short)
	ctx := context.Background()

	release, ok, _, err := holder.Lease(ctx, "k", 400*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("Lease = %v, %v", ok, err)
	}
	defer release(0)
	eventually(t, 10*time.Second, func() error {
		if _, ok, _, err := other.Lease(ctx, "k", time.Hour); err != nil || !ok {
			return errors.New("lease still held")
		}
		return nil
	})
}
