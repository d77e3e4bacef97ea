package mget

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2/late"
	"github.com/sidecache/sidecache/internal/redistest"
)

func newLean(t *testing.T, addr string, conns int, tune ...func(*Options)) *Pool {
	t.Helper()
	o := Options{Addr: addr, MaxConns: conns}
	for _, f := range tune {
		f(&o)
	}
	p := New(o)
	t.Cleanup(p.Close)
	return p
}

// raw is a go-redis client of addr, for the tests' own commands.
func raw(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// leanGet runs one MGET and returns copies of its values (nil: nil).
func leanGet(ctx context.Context, p *Pool, keys ...string) ([]any, error) {
	var out []any
	err := p.MGet(ctx, time.Now(), time.Now().Add(5*time.Second), [3]string{keys[0]}, keys[1:], func(vals [][]byte) {
		for _, v := range vals {
			if v == nil {
				out = append(out, nil)
			} else {
				out = append(out, string(v))
			}
		}
	})
	return out, err
}

func sameVals(t *testing.T, what string, got []any, want ...any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			g, w := got[i], want[i]
			if s, ok := g.(string); ok && len(s) > 40 {
				g = s[:40] + "…"
			}
			if s, ok := w.(string); ok && len(s) > 40 {
				w = s[:40] + "…"
			}
			t.Errorf("%s: value %d = %v, want %v", what, i, g, w)
		}
	}
}

// TestLeanMGet: values, missing keys and keys of another type (nil, as
// MGET answers), an empty string (not nil), and a value far larger than
// the connection's read buffer, on one pooled connection reused.
func TestLeanMGet(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	huge := strings.Repeat("0123456789abcdef", 1<<20) // 16 MiB
	for k, v := range map[string]string{"a": "1", "empty": "", "huge": huge} {
		if err := rc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.HSet(ctx, "hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	p := newLean(t, srv.Addr(), 2)
	for round := range 2 {
		got, err := leanGet(ctx, p, "a", "missing", "hash", "empty", "a")
		if err != nil {
			t.Fatal(err)
		}
		sameVals(t, "small", got, "1", nil, nil, "", "1")
		got, err = leanGet(ctx, p, "huge", "a", "huge")
		if err != nil {
			t.Fatal(err)
		}
		sameVals(t, "huge", got, huge, "1", huge)
		got, err = leanGet(ctx, p, "missing")
		if err != nil {
			t.Fatal(err)
		}
		sameVals(t, "missing alone", got, nil)
		if n := len(p.idle); n != 1 {
			t.Fatalf("round %d: %d idle connections, want the one reused", round, n)
		}
	}
}

// TestLeanErrorReply: an error reply is a redis.Error (so the breaker's
// unavailable classifies it as it does go-redis's: l2's TestLeanErrorReply),
// here the AUTH of a Redis without a password.
func TestLeanErrorReply(t *testing.T) {
	srv := redistest.Start(t)
	p := newLean(t, srv.Addr(), 2, func(o *Options) { o.Password = "secret" })
	_, err := leanGet(context.Background(), p, "a")
	var rerr redis.Error
	if !errors.As(err, &rerr) || late.Is(err) {
		t.Fatalf("mget = %v; want a redis.Error, not lateness", err)
	}
}

// TestLeanAuthAndDB: a password and a database other than 0 are used, as
// go-redis uses them.
func TestLeanAuthAndDB(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 3})
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Set(ctx, "a", "in db 3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, "ACL", "SETUSER", "reader", "on", ">secret", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"", "reader"} {
		p := newLean(t, srv.Addr(), 2, func(o *Options) { o.Username = user; o.Password = "secret"; o.DB = 3 })
		got, err := leanGet(ctx, p, "a")
		if err != nil {
			t.Fatalf("user %q: %v", user, err)
		}
		sameVals(t, "db 3", got, "in db 3")
	}
	p := newLean(t, srv.Addr(), 2, func(o *Options) { o.DB = 3 })
	if _, err := leanGet(ctx, p, "a"); err == nil {
		t.Fatal("no password: no error")
	}
}

// TestLeanPausedRedis: a Redis that does not answer fails the call at the
// context's deadline, and the connection it was on is not reused: after
// the pause the next call gets its own answer, not the late one.
func TestLeanPausedRedis(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	for k, v := range map[string]string{"a": "1", "b": "2"} {
		if err := rc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	p := newLean(t, srv.Addr(), 2)
	if _, err := leanGet(ctx, p, "a"); err != nil { // a pooled connection
		t.Fatal(err)
	}
	if err := rc.Do(ctx, "CLIENT", "PAUSE", "1000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := leanGet(dctx, p, "a")
	cancel()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || late.Is(err) { // counted by the breaker
		t.Fatalf("mget on a paused Redis = %v; want a timeout", err)
	}
	if n := len(p.idle); n != 0 {
		t.Fatalf("%d idle connections after a timeout, want the timed-out one closed", n)
	}
	got, err := leanGet(ctx, p, "b") // waits out the pause
	if err != nil {
		t.Fatal(err)
	}
	sameVals(t, "after the pause", got, "2")
}

// TestLeanKilledRedis: a dead Redis is an error at once; after a restart
// the pooled connection the old process closed costs no error (one retry
// on a new connection).
func TestLeanKilledRedis(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := newLean(t, srv.Addr(), 2)
	if _, err := leanGet(ctx, p, "a"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if _, err := leanGet(ctx, p, "a"); err == nil || late.Is(err) { // counted by the breaker
		t.Fatalf("mget on a killed Redis = %v; want an error", err)
	}
	if _, err := leanGet(ctx, p, "a"); err == nil {
		t.Fatal("mget on a killed Redis, twice: no error")
	}
	srv.Restart()
	if err := raw(t, srv.Addr()).Set(ctx, "a", "new", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := leanGet(ctx, p, "a"); err != nil {
		t.Fatal(err) // puts one connection in the pool
	}
	srv.Restart() // which the old process closed
	if err := raw(t, srv.Addr()).Set(ctx, "a", "newer", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := leanGet(ctx, p, "a")
	if err != nil {
		t.Fatalf("first mget after a restart: %v; want a retry on a new connection", err)
	}
	sameVals(t, "after a restart", got, "newer")
}

// TestLeanBoundsConnections: with every connection busy, a caller waits
// for one no longer than its deadline, and the pool never opens more.
func TestLeanBoundsConnections(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := newLean(t, srv.Addr(), 2)
	hold := make(chan struct{})
	held := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_ = p.MGet(ctx, time.Now(), time.Now().Add(time.Minute), [3]string{"a"}, nil, func([][]byte) { held <- struct{}{}; <-hold })
		})
	}
	<-held
	<-held
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := leanGet(dctx, p, "a")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("mget with every connection busy = %v; want the deadline", err)
	}
	close(hold)
	wg.Wait()
	if _, err := leanGet(ctx, p, "a"); err != nil {
		t.Fatal(err)
	}
	if n := len(p.idle); n != 2 {
		t.Fatalf("%d idle connections, want the 2 opened", n)
	}
}

// TestLeanConnIsRaw: the MGET's write and its reply's reads go through
// internal/rawio's raw calls (Linux), so an L2 hit enters no
// syscall.Syscall on the Redis socket (rawio's doc).
func TestLeanConnIsRaw(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw calls are Linux's")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	if err := raw(t, srv.Addr()).Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newLean(t, srv.Addr(), 1)
	got, err := leanGet(ctx, p, "a")
	if err != nil {
		t.Fatal(err)
	}
	sameVals(t, "mget", got, "1")
	if len(p.idle) != 1 {
		t.Fatalf("%d idle connections, want 1", len(p.idle))
	}
	if r, w := p.idle[0].rw.Calls(); r == 0 || w == 0 {
		t.Errorf("%d raw reads, %d raw writes on the connection; want both > 0", r, w)
	}
}

// TestLeanDeadlineKeptAndBounded: a connection keeps the socket deadline
// of its last call while that deadline still leaves a call almost all of
// its time (no SetDeadline per MGET), and a call whose deadline comes
// before the kept one sets its own, so a stalled Redis fails it at its
// deadline, not at the earlier call's.
func TestLeanDeadlineKeptAndBounded(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := raw(t, srv.Addr())
	if err := rc.Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newLean(t, srv.Addr(), 1)
	mget := func(dl time.Time) error {
		return p.MGet(ctx, time.Now(), dl, [3]string{"a"}, nil, func([][]byte) {})
	}
	far := time.Now().Add(time.Hour)
	if err := mget(far); err != nil {
		t.Fatal(err)
	}
	if err := mget(far.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if got := p.idle[0].dl; !got.Equal(far) {
		t.Fatalf("socket deadline %v after a call due 1 ms later; want the first call's, %v, kept", got, far)
	}
	if err := mget(far.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := p.idle[0].dl; !got.Equal(far.Add(time.Hour)) {
		t.Fatalf("socket deadline %v after a call due an hour later; want that call's", got)
	}
	// Redis answers nothing for 3 s: a call due in 100 ms must fail then,
	// not succeed once Redis resumes under the kept deadline.
	if err := rc.Do(ctx, "CLIENT", "PAUSE", "3000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(ctx, "CLIENT", "UNPAUSE")
	err := mget(time.Now().Add(100 * time.Millisecond))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("mget due in 100 ms against a paused Redis = %v; want its deadline's timeout", err)
	}
}
