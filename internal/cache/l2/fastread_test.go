package l2

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/cache/l2/guess"
	"github.com/sidecache/sidecache/internal/redistest"
)

// calls counts the commands Redis ran, from INFO commandstats: scripts
// (EVAL and EVALSHA) and MGETs.
type calls struct{ scripts, mgets int }

func commandCalls(t testing.TB, rc *redis.Client) calls {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := func(cmd string) int {
		_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
		if !ok {
			return 0
		}
		v, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		return v
	}
	return calls{scripts: n("eval") + n("evalsha"), mgets: n("mget")}
}

// readVia reads key on r and reports whether it hit and which commands the
// read cost Redis. scripts is 1 if the read ran the script: the first
// EVALSHA on a Redis that does not have it yet is followed by an EVAL.
func readVia(t *testing.T, r *replica, rc *redis.Client, key string) (hit bool, c calls) {
	t.Helper()
	before := commandCalls(t, rc)
	_, hit = r.mustGet(t, key)
	after := commandCalls(t, rc)
	return hit, calls{min(after.scripts-before.scripts, 1), after.mgets - before.mgets}
}

// TestReadWithoutScriptOnceTagsKnown: the script costs Redis about 1.4× a
// GET; once a replica knows a key's tags (it stored the entry, or read it
// once), a hit is one MGET and no script.
func TestReadWithoutScriptOnceTagsKnown(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	if err := a.Set(ctx, "k", entry("v", time.Minute, "client:1", "route:client")); err != nil {
		t.Fatal(err)
	}
	a.flush(t)

	for _, tc := range []struct {
		name string
		r    *replica
		want calls
	}{
		{"the writer", a, calls{mgets: 1}},
		{"a peer, first read", b, calls{scripts: 1}},
		{"a peer, second read", b, calls{mgets: 1}},
	} {
		hit, c := readVia(t, tc.r, rc, "k")
		if !hit || c != tc.want {
			t.Errorf("%s: hit=%v, Redis ran %+v; want a hit for %+v", tc.name, hit, c, tc.want)
		}
	}
}

// TestGuessedReadRefuses: a read by MGET is refused exactly when the
// script would refuse it: a tag invalidated since the entry's request, a
// tag whose epoch key Redis evicted, an entry gone (a purge).
func TestGuessedReadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, a *replica, rc *redis.Client)
	}{
		{"tag invalidated by a peer", func(t *testing.T, a *replica, _ *redis.Client) {
			if err := a.InvalidateTags(context.Background(), "route:client"); err != nil {
				t.Fatal(err)
			}
		}},
		{"epoch key evicted", func(t *testing.T, _ *replica, rc *redis.Client) {
			if err := rc.Del(context.Background(), "test:v:client:1").Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"purged", func(t *testing.T, a *replica, _ *redis.Client) {
			if _, err := a.PurgeAll(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			a := newReplica(t, []string{srv.Addr()})
			b := newReplica(t, []string{srv.Addr()})
			rc := raw(t, srv.Addr())
			if err := a.Set(context.Background(), "k", entry("v", time.Minute, "client:1", "route:client")); err != nil {
				t.Fatal(err)
			}
			a.flush(t)
			if hit, _ := readVia(t, b, rc, "k"); !hit {
				t.Fatal("no hit before the fault")
			}
			tc.fault(t, a, rc)
			if hit, c := readVia(t, b, rc, "k"); hit || c != (calls{mgets: 1}) {
				t.Fatalf("after the fault: hit=%v by %+v; want a miss by one MGET", hit, c)
			}
		})
	}
}

// TestGuessedReadChecksEveryHeaderTag: the guess is only which epochs are
// read; the header decides which must be. A peer stores the key again with
// a tag this replica did not guess, and invalidates that tag: the read must
// be a miss (the header names a tag whose epoch the MGET did not read, so
// the script decides). With a tag not guessed but current, it is a hit,
// and the guess learns the tag.
func TestGuessedReadChecksEveryHeaderTag(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	store := func(tags ...string) {
		t.Helper()
		if err := a.Set(ctx, "k", entry("v", time.Minute, tags...)); err != nil {
			t.Fatal(err)
		}
		a.flush(t)
	}

	store("client:1")
	if hit, _ := readVia(t, b, rc, "k"); !hit {
		t.Fatal("no hit for the first version")
	}
	store("client:1", "user:7") // b still guesses client:1 alone
	if err := a.InvalidateTags(ctx, "user:7"); err != nil {
		t.Fatal(err)
	}
	if hit, c := readVia(t, b, rc, "k"); hit || c != (calls{scripts: 1, mgets: 1}) {
		t.Fatalf("tag not guessed and invalidated: hit=%v by %+v; want a miss by an MGET and the script", hit, c)
	}

	store("client:1", "user:8") // b's guess is still client:1 alone
	if hit, c := readVia(t, b, rc, "k"); !hit || c != (calls{scripts: 1, mgets: 1}) {
		t.Fatalf("tag not guessed, current: hit=%v by %+v; want a hit by an MGET and the script", hit, c)
	}
	if hit, c := readVia(t, b, rc, "k"); !hit || c != (calls{mgets: 1}) {
		t.Fatalf("tag learned: hit=%v by %+v; want a hit by one MGET", hit, c)
	}
}

// TestGuessesBounded: the keys and tags that fill the table come from
// requests; it never holds more than guess.Slots guesses or guess.Bytes, a
// key with too many tag bytes gets none (and is read by the script), and a
// key whose guess was dropped is still read right.
func TestGuessesBounded(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	for i := range 3 * guess.Slots {
		a.learn(fmt.Sprint("short", i), []string{fmt.Sprint("tag", i)})
	}
	if n, _ := a.guesses.Size(); n > guess.Slots || n < guess.Slots/2 {
		t.Fatalf("%d guesses held after %d keys; want at most %d (and most of them)", n, 3*guess.Slots, guess.Slots)
	}
	big := strings.Repeat("x", maxGuessBytes/2-8)
	for i := range 3 * guess.Bytes / maxGuessBytes {
		a.learn(fmt.Sprint("big", i), []string{fmt.Sprint(i, big), fmt.Sprint(big, i)})
	}
	if n, size := a.guesses.Size(); size > guess.Bytes || size < guess.Bytes/2 {
		t.Fatalf("%d guesses of %d bytes held after %d of about %d; want at most %d (and most of them)", n, size, 3*guess.Bytes/maxGuessBytes, maxGuessBytes, guess.Bytes)
	}

	long := strings.Repeat("x", maxGuessBytes+1)
	if err := a.Set(ctx, "long", entry("v", time.Minute, long)); err != nil {
		t.Fatal(err)
	}
	a.flush(t)
	for i := range 2 {
		if hit, c := readVia(t, b, rc, "long"); !hit || c != (calls{scripts: 1}) {
			t.Fatalf("read %d of a key with %d tag bytes: hit=%v by %+v; want a hit by the script", i, len(long), hit, c)
		}
	}
	if err := a.InvalidateTags(ctx, long); err != nil {
		t.Fatal(err)
	}
	if hit, _ := readVia(t, b, rc, "long"); hit {
		t.Fatal("hit after its one tag was invalidated")
	}
}

// TestGetManyGuessed: GetMany reads known keys by MGET, unknown ones by
// the script, and both refuse as Get does.
func TestGetManyGuessed(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, []string{srv.Addr()})
	b := newReplica(t, []string{srv.Addr()})
	rc := raw(t, srv.Addr())
	ctx := context.Background()
	keys := []string{"known", "unknown", "invalidated", "retagged", "gone"}
	for _, k := range keys {
		if err := a.Set(ctx, k, entry(k, time.Minute, "t:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	a.flush(t)
	for _, k := range []string{"known", "invalidated", "retagged", "gone"} {
		if _, ok := b.mustGet(t, k); !ok {
			t.Fatalf("no hit for %s", k)
		}
	}
	if err := a.Set(ctx, "retagged", entry("retagged", time.Minute, "t:retagged", "extra")); err != nil {
		t.Fatal(err)
	}
	a.flush(t)
	if err := a.InvalidateTags(ctx, "t:invalidated", "extra"); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	before := commandCalls(t, rc)
	es, err := b.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	after := commandCalls(t, rc)
	for i, want := range []bool{true, true, false, false, false} {
		if got := es[i] != nil; got != want || got && string(es[i].Body) != keys[i] {
			t.Errorf("%s: %v, want hit=%v", keys[i], es[i], want)
		}
	}
	// MGETs for the four known keys, the script for "unknown" and for
	// "retagged" (whose header names a tag b did not know).
	if c := (calls{after.scripts - before.scripts, after.mgets - before.mgets}); c != (calls{scripts: 2, mgets: 4}) {
		t.Errorf("Redis ran %+v, want 4 MGETs and 2 scripts", c)
	}
}

// TestHeaderParsing: header reads what encodeValue writes, without tags,
// and refuses what it did not write.
func TestHeaderParsing(t *testing.T) {
	for _, tc := range []struct {
		in    string
		at    int64
		lines string
		ok    bool
	}{
		{"sc2 12\n\npayload", 12, "", true},
		{"sc2 12\na\nb:c\n\n\x00\n\n", 12, "a\nb:c\n", true},
		{"sc2 x\na\n\np", 0, "", false},
		{"sc2 12\na\n", 0, "", false},
		{"sc1 12\n\np", 0, "", false},
	} {
		at, lines, _, ok := header([]byte(tc.in))
		if at != tc.at || string(lines) != tc.lines || ok != tc.ok {
			t.Errorf("header(%q) = %d, %q, %v; want %d, %q, %v", tc.in, at, lines, ok, tc.at, tc.lines, tc.ok)
		}
	}
}

// trips counts the round trips a client makes: commands sent alone and
// pipelines (one each, whatever nodes they span). The store's probe PINGs
// an idle server, and tries a write (checkWrites), every ProbeInterval
// from its own goroutine (Store.probe): those are no round trip of the
// read being counted, and a read that a loaded machine stretches past
// ProbeInterval would otherwise count one.
type trips struct{ n atomic.Int64 }

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "ping" && !probeWrite(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// probeWrite reports whether cmd is the probe's write (checkWrites),
// sent from its own goroutine as its PING is.
func probeWrite(cmd redis.Cmder) bool {
	args := cmd.Args()
	return cmd.Name() == "set" && len(args) > 1 && strings.HasSuffix(fmt.Sprint(args[1]), "probe")
}

func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestClusterGuessedRead: in Cluster a replica that knows a key's tags
// reads the entry and their epochs in one round trip (one pipeline across
// the nodes), else in two; and refuses as the two-trip read does: a tag it
// did not guess that was invalidated, an epoch key gone.
func TestClusterGuessedRead(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	a := newReplica(t, cl.Addrs())
	b := newReplica(t, cl.Addrs())
	ctx := context.Background()
	h := &trips{}
	b.rdb.AddHook(h)
	store := func(tags ...string) {
		t.Helper()
		if err := a.Set(ctx, "k", entry("v", time.Minute, tags...)); err != nil {
			t.Fatal(err)
		}
		a.flush(t)
	}
	read := func() (bool, int64) {
		t.Helper()
		before := h.n.Load()
		_, ok := b.mustGet(t, "k")
		return ok, h.n.Load() - before
	}

	store("client:1", "route:client")
	for _, want := range []int64{2, 1} { // unknown, then guessed
		if hit, n := read(); !hit || n != want {
			t.Fatalf("hit=%v in %d round trips, want a hit in %d", hit, n, want)
		}
	}
	store("client:1", "route:client", "user:7") // not guessed by b
	if err := a.InvalidateTags(ctx, "user:7"); err != nil {
		t.Fatal(err)
	}
	if hit, n := read(); hit || n != 3 {
		t.Fatalf("tag not guessed and invalidated: hit=%v in %d round trips, want a miss in 3 (the guess, then the two-trip read)", hit, n)
	}
	store("client:1", "route:client", "user:8")
	if hit, _ := read(); !hit {
		t.Fatal("tag not guessed, current: a miss")
	}
	if hit, n := read(); !hit || n != 1 {
		t.Fatalf("tag learned: hit=%v in %d round trips, want a hit in 1", hit, n)
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), DisableIdentity: true})
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Del(ctx, "test:v:user:8").Err(); err != nil {
		t.Fatal(err)
	}
	if hit, n := read(); hit || n != 1 {
		t.Fatalf("epoch key gone: hit=%v in %d round trips, want a miss in 1", hit, n)
	}
}
