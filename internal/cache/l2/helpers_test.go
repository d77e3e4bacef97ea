package l2

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache"
)

// replica is one Store with what its callbacks reported, as a peer of the
// proxy would see it.
type replica struct {
	*Store
	inv    chan Invalidation
	states chan bool
	logs   *syncBuffer
}

func newReplica(t testing.TB, addrs []string, tune ...func(*Options)) *replica {
	t.Helper()
	r := &replica{
		inv:    make(chan Invalidation, 64),
		states: make(chan bool, 64),
		logs:   &syncBuffer{},
	}
	opts := Options{
		Addrs:  addrs,
		Prefix: "test:",
		// Generous for a loaded 2-core machine under -race: a spurious
		// timeout would open the breaker mid-test. Outage tests set a
		// short one and retry what they check after recovery.
		Timeout:       5 * time.Second,
		ProbeInterval: 50 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(r.logs, nil)),
		OnStateChange: func(up bool) { r.states <- up },
		OnInvalidate:  func(inv Invalidation) { r.inv <- inv },
	}
	for _, f := range tune {
		f(&opts)
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r.Store = s
	if up := <-r.states; up != s.Up() {
		t.Fatalf("initial OnStateChange(%v) but Up() = %v", up, s.Up())
	}
	r.waitSubscribed(t)
	return r
}

// waitSubscribed returns once the replica's subscription is live, so a
// test's first publish is not sent before anyone listens.
func (r *replica) waitSubscribed(t testing.TB) {
	t.Helper()
	if !r.Up() {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		// This replica's own subscription: a count of subscribers on the
		// channel would also count its peers'.
		if r.subscribed.Load() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("subscription not live after 5s")
}

// nextInvalidation waits for one OnInvalidate call.
func (r *replica) nextInvalidation(t testing.TB, within time.Duration) Invalidation {
	t.Helper()
	select {
	case inv := <-r.inv:
		return inv
	case <-time.After(within):
		t.Fatalf("no invalidation within %s", within)
		return Invalidation{}
	}
}

// awaitTag waits for the invalidation of tag alone, letting through on
// the way only those pass accepts (a gap notice, a purge) and failing on
// any other.
func (r *replica) awaitTag(t testing.TB, within time.Duration, tag string, pass func(Invalidation) bool) {
	t.Helper()
	for {
		inv := r.nextInvalidation(t, within)
		if len(inv.Tags) == 1 && inv.Tags[0] == tag {
			return
		}
		if !pass(inv) {
			t.Fatalf("got %+v on the way to %q", inv, tag)
		}
	}
}

// waitUp is for replicas with a short Timeout, which a loaded machine may
// start down: it returns once the probe has brought the replica up,
// consuming that state change.
func (r *replica) waitUp(t testing.TB) {
	t.Helper()
	for !r.Up() {
		r.nextState(t, 10*time.Second)
	}
	r.waitSubscribed(t)
}

// nextState waits for one OnStateChange call.
func (r *replica) nextState(t testing.TB, within time.Duration) bool {
	t.Helper()
	select {
	case up := <-r.states:
		return up
	case <-time.After(within):
		t.Fatalf("no state change within %s", within)
		return false
	}
}

func (r *replica) flush(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func (r *replica) mustGet(t testing.TB, key string) (*cache.Entry, bool) {
	t.Helper()
	e, ok, err := r.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return e, ok
}

// raw is a plain client for looking at what the store wrote.
func raw(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func entry(body string, ttl time.Duration, tags ...string) *cache.Entry {
	return &cache.Entry{
		Status:   200,
		Header:   http.Header{"Content-Type": {"text/plain"}},
		Body:     []byte(body),
		StoredAt: time.Now(),
		TTL:      ttl,
		Tags:     tags,
	}
}

func sameEntry(t testing.TB, got, want *cache.Entry) {
	t.Helper()
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) ||
		!reflect.DeepEqual(got.Header, want.Header) || !reflect.DeepEqual(got.Tags, want.Tags) ||
		!reflect.DeepEqual(got.Variants, want.Variants) || !got.StoredAt.Equal(want.StoredAt) ||
		got.TTL != want.TTL || got.StaleIfError != want.StaleIfError ||
		got.StaleWhileRevalidate != want.StaleWhileRevalidate {
		t.Fatalf("entry differs:\n got %+v\nwant %+v", got, want)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually retries f until it succeeds: after an outage a replica with a
// short Timeout may fail a few more calls on a loaded machine before its
// pool and breaker settle.
func eventually(t testing.TB, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %s: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
