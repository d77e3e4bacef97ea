package batchroute

import (
	"errors"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/batch"
	"github.com/sidecache/sidecache/internal/route"
)

// TestOptions: the bounds a batch route's loader gets, with its config
// set and unset. The metrics are not reported to here (nil).
func TestOptions(t *testing.T) {
	timeout := 2 * time.Second
	hooks := Hooks{Timeout: func() time.Duration { return timeout }, Now: time.Now}
	rt := &route.Route{Name: "users", Batch: &route.Batch{MaxSize: 100, MaxWait: 5 * time.Millisecond}}
	o := Options(rt, nil, nil, hooks)
	inflight := batch.DefaultMaxInFlight
	if o.MaxInFlightAll != 4*inflight || o.MaxQueued != 14*100*inflight || o.MaxQueuedAll != 14*100*4*inflight {
		t.Errorf("defaults: in flight %d, queued %d, queued all %d", o.MaxInFlightAll, o.MaxQueued, o.MaxQueuedAll)
	}
	if o.Quarantine != 10*time.Second {
		t.Errorf("quarantine with negative_ttl 0: %v", o.Quarantine)
	}
	if d := o.Deadline(); d != 5*time.Millisecond+2*time.Second {
		t.Errorf("deadline %v", d)
	}
	timeout = time.Second // a reload
	if d := o.Deadline(); d != 5*time.Millisecond+time.Second {
		t.Errorf("deadline after a reload %v", d)
	}
	rt = &route.Route{Name: "users", NegativeTTL: time.Minute, Batch: &route.Batch{MaxSize: 10, MaxInFlight: 3, MaxRouteInFlight: 5}}
	o = Options(rt, nil, nil, hooks)
	if o.MaxInFlightAll != 5 || o.MaxQueued != 14*10*3 || o.MaxQueuedAll != 14*10*5 || o.Quarantine != time.Minute {
		t.Errorf("set: in flight %d, queued %d, queued all %d, quarantine %v", o.MaxInFlightAll, o.MaxQueued, o.MaxQueuedAll, o.Quarantine)
	}
}

func TestDroppedReason(t *testing.T) {
	for err, want := range map[error]string{batch.ErrQueueFull: "queue-full", batch.ErrDeadline: "deadline", errors.New("gone"): "abandoned"} {
		if got := droppedReason(err); got != want {
			t.Errorf("droppedReason(%v) = %q, want %q", err, got, want)
		}
	}
}
