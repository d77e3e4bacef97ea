package invariant_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The redis-restart row's hooks (invariant.Config SaveRedis, RestartRedis,
// StartReplica).

// saveRedis snapshots Redis into its dump file (SAVE).
func (e *env) saveRedis(ctx context.Context) error {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	return rc.Save(ctx).Err()
}

// restartRedis restarts Redis on its port: empty (SHUTDOWN NOSAVE, and
// the dump file of an earlier snapshot removed first), or killed
// (SIGKILL, a crash) and started from the dump file the last saveRedis
// wrote. down, when not nil, is called while Redis is down, and Redis
// starts once it returns. On an evicting env (evict-epochs) the new
// instance is made to evict again (reevict): it has not since it
// started, and the row's deletions of epoch keys count as evictions only
// on a Redis that has.
func (e *env) restartRedis(evicting bool) func(ctx context.Context, snapshot bool, down func()) error {
	return func(ctx context.Context, snapshot bool, down func()) error {
		rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
		if !snapshot {
			dir, err := rc.ConfigGet(ctx, "dir").Result()
			if err != nil {
				rc.Close()
				return fmt.Errorf("config get dir: %w", err)
			}
			if err := os.Remove(filepath.Join(dir["dir"], "dump.rdb")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				rc.Close()
				return fmt.Errorf("remove the snapshot: %w", err)
			}
			_ = rc.ShutdownNoSave(ctx).Err() // the connection closes: no reply
		}
		rc.Close()
		e.redis.Kill() // reaps it when it shut down, kills it if it still runs
		if down != nil {
			down()
		}
		e.redis.Restart()
		if evicting {
			return e.reevict(ctx)
		}
		return nil
	}
}

// reevict makes a restarted Redis evict a few keys (maxmemory just over
// what it uses, allkeys-lru, junk written until INFO stats evicted_keys
// is above 0), then lifts the limit and removes the junk. Unlike
// evicting, it keeps the data a snapshot brought back.
func (e *env) reevict(ctx context.Context) error {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	info, err := rc.Info(ctx, "memory").Result()
	if err != nil {
		return fmt.Errorf("info memory: %w", err)
	}
	used := infoInt(info, "used_memory")
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		return fmt.Errorf("config set: %w", err)
	}
	// Room for the replicas reconnecting meanwhile: their connections'
	// buffers count in used_memory and no eviction frees them, and with
	// 512 KiB the junk's SET was refused (OOM) once the extra replicas
	// of the later rows (redis-refuses-writes' among them) reconnected
	// at once, leaving maxmemory set for the rows after.
	if err := rc.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+(4<<20), 10)).Err(); err != nil {
		return fmt.Errorf("config set: %w", err)
	}
	junk := strings.Repeat("x", 64<<10)
	var keys []string
	for i := 0; ; i++ {
		if i > 1000 {
			return errors.New("redis never evicted")
		}
		k := fmt.Sprintf("junk:%d", i)
		keys = append(keys, k)
		if err := rc.Set(ctx, k, junk, 0).Err(); err != nil {
			_ = rc.ConfigSet(ctx, "maxmemory", "0").Err() // not for the rows after
			return fmt.Errorf("set: %w", err)
		}
		if info := rc.Info(ctx, "stats").Val(); !strings.Contains(info, "evicted_keys:0\r") {
			break
		}
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		return fmt.Errorf("config set: %w", err)
	}
	return rc.Del(ctx, keys...).Err()
}

// redisOOM is the redis-oom row's hook: on, Redis goes over maxmemory
// (1 byte) under noeviction, and a SET must be refused for it; off, the
// limit is lifted and the policy it had (allkeys-lru on an evicting env)
// comes back.
func (e *env) redisOOM(ctx context.Context, on bool) error {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	if !on {
		if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			return fmt.Errorf("config set: %w", err)
		}
		return rc.ConfigSet(ctx, "maxmemory-policy", e.policy).Err()
	}
	p, err := rc.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return fmt.Errorf("config get: %w", err)
	}
	e.policy = p["maxmemory-policy"]
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		return fmt.Errorf("config set: %w", err)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		return fmt.Errorf("config set: %w", err)
	}
	if err := rc.Set(ctx, "oom-check", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		return fmt.Errorf("redis not out of memory: SET answered %v", err)
	}
	return nil
}

// refuseWrites is the redis-refuses-writes row's hook: on, Redis (which
// has no replica) asks for one before it takes a write
// (min-replicas-to-write 1), and a SET must be refused with NOREPLICAS;
// off, it takes writes again.
func (e *env) refuseWrites(ctx context.Context, on bool) error {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	n := "0"
	if on {
		n = "1"
	}
	if err := rc.ConfigSet(ctx, "min-replicas-to-write", n).Err(); err != nil {
		return fmt.Errorf("config set: %w", err)
	}
	err := rc.Set(ctx, "refuse-check", "x", 0).Err()
	switch {
	case on && (err == nil || !strings.HasPrefix(err.Error(), "NOREPLICAS")):
		return fmt.Errorf("redis takes writes: SET answered %v", err)
	case !on && err != nil:
		return fmt.Errorf("redis still refuses writes: %w", err)
	}
	return nil
}

// stallRedis is the redis-stall row's hook: Redis stalls for d without
// going down, paused (CLIENT PAUSE d ALL: every command of every client
// postponed until then) or frozen (its process stopped, continued d
// later). back delivers when it answered again: a PING sent once the
// pause was in force, on a connection opened before it with no read
// timeout, is answered then; a frozen Redis, when it was continued.
func (e *env) stallRedis(ctx context.Context, freeze bool, d time.Duration) (<-chan time.Time, error) {
	back := make(chan time.Time, 1)
	if freeze {
		e.redis.Pause()
		go func() {
			time.Sleep(d)
			at := time.Now()
			e.redis.Resume()
			back <- at
		}()
		return back, nil
	}
	pinger := redis.NewClient(&redis.Options{Addr: e.redis.Addr(), ReadTimeout: -1, PoolSize: 1})
	if err := pinger.Ping(ctx).Err(); err != nil {
		pinger.Close()
		return nil, fmt.Errorf("ping: %w", err)
	}
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	if err := rc.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
		pinger.Close()
		return nil, fmt.Errorf("client pause: %w", err)
	}
	go func() {
		defer pinger.Close()
		_ = pinger.Ping(context.Background()).Err() // answered once the pause ends
		back <- time.Now()
	}()
	return back, nil
}

// infoInt is field's value in an INFO section (0 when absent).
func infoInt(info, field string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// lateReplica starts one more replica like the others (after a Redis
// restart) and returns its proxy's and admin's base URLs; it runs until
// t ends (the soak's seeds each leave one).
func (e *env) lateReplica(t testing.TB) func() (proxy, admin string) {
	return func() (string, string) { return startReplica(t, e.yaml) }
}

// retagged starts one more replica from the replicas' config as a deploy
// changed it (invariant.Config.StartRetagged): r-summary renamed r-digest
// and tagged rsum:{id}, which r-write invalidates instead of r:{id}.
func (e *env) retagged(t testing.TB) func() (proxy, admin string) {
	return func() (string, string) {
		yaml := e.yaml
		for _, c := range [][2]string{
			{"  - name: r-summary\n    path: /r/{id:[1-9][0-9]*}/summary\n    ttl: 5m\n    stale_if_error: 10m\n    tags: [\"r:{id}\"]\n",
				"  - name: r-digest\n    path: /r/{id:[1-9][0-9]*}/summary\n    ttl: 5m\n    stale_if_error: 10m\n    tags: [\"rsum:{id}\"]\n"},
			{"    path: /r/{id:[1-9][0-9]*}\n    invalidate: [\"r:{id}\"]\n", "    path: /r/{id:[1-9][0-9]*}\n    invalidate: [\"rsum:{id}\"]\n"},
		} {
			if !strings.Contains(yaml, c[0]) {
				t.Fatalf("the replicas' config lost %q", c[0])
			}
			yaml = strings.Replace(yaml, c[0], c[1], 1)
		}
		return startReplica(t, yaml)
	}
}

// go-redis logs each dial Redis refuses while the redis-restart row has
// it down (the replicas' pools): dropped unless INVARIANT_LOG is set.
func init() {
	if os.Getenv("INVARIANT_LOG") == "" {
		redis.SetLogger(quietRedis{})
	}
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
