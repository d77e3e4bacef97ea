package invariant_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/invariant"
	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/mix"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/redistest"
	"github.com/sidecache/sidecache/internal/server"
)

// The replicas' config. Every route of the mix is here; a feature that
// needs a route setting of its own adds a route rather than changing one.
// redis.timeout stays under 5/16 of max_lag, the README's condition for
// the max_lag promise.
const replicaConfig = `
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token: secret
upstream:
  url: %[1]s
  timeout: %[6]s
  allow_upgrades: [websocket]
  tunnel_idle_timeout: 250ms
  max_tunnels: 2
cache:
  max_body_bytes: %[3]d
  max_key_bytes: %[4]d
  l1:
    max_bytes: 16MiB
  l2:
    redis:
      addrs: [%[2]s]
      timeout: 250ms
coherence:
  max_lag: %[5]s
routes:
  - name: r
    path: /r/{id:[1-9][0-9]*}
    ttl: 5m
    stale_if_error: 10m
    tags: ["r:{id}"]
  - name: r-summary
    path: /r/{id:[1-9][0-9]*}/summary
    ttl: 5m
    stale_if_error: 10m
    tags: ["r:{id}"]
  - name: r-write
    methods: [PATCH, PUT, DELETE]
    path: /r/{id:[1-9][0-9]*}
    invalidate: ["r:{id}"]
  - name: p
    path: /p/{id:[1-9][0-9]*}
    ttl: 5m
    forward_headers: all
    key:
      query: [fields]
    tags: ["p:{id}"]
  - name: n
    path: /n/{id:[1-9][0-9]*}
    ttl: 5m
    freshness: origin
    request_no_cache: refresh
    stale_if_error: 10m
    tags: ["n:{id}"]
  - name: n-write
    methods: [PATCH]
    path: /n/{id:[1-9][0-9]*}
    invalidate: ["n:{id}"]
  - name: t
    path: /t/{name}
    ttl: 5m
    tags: ["t:{name}"]
  - name: t-write
    methods: [PATCH]
    path: /t/{name}
    invalidate: ["t:{name}"]
  - name: k
    path: /k/{id:[1-9][0-9]*}
    ttl: 5m
    key:
      headers: [X-Tenant, Accept-Language]
  - name: a
    path: /a/{id:[1-9][0-9]*}
    ttl: 5m
  - name: h
    path: /h/{id:[1-9][0-9]*}
    ttl: 5m
    key:
      host: svc.invariant
  - name: u
    path: /u/{id:[1-9][0-9]*}
    ttl: 5m
    batch:
      path: /u
      param: ids
      id_field: id
      max_size: 32
      max_wait: 2ms
  - name: w
    path: /w/{id:[1-9][0-9]*}
    ttl: 5m
    batch:
      path: /u
      param: ids
      id_field: id
      max_size: 32
      max_wait: 3s
  - name: e
    path: /e/{id:[1-9][0-9]*}
    ttl: 5m
    tags: ["e:{id}"]
    batch:
      path: /e
      param: ids
      id_field: id
      etag_field: etag
      max_size: 32
      max_wait: 2ms
  - name: e-write
    methods: [PATCH]
    path: /e/{id:[1-9][0-9]*}
    invalidate: ["e:{id}"]
  - name: u-list
    path: /u
    split:
      param: ids
      route: u
  - name: s
    path: /s/{id:[1-9][0-9]*}
    ttl: 5m
    freshness: origin
    stale_if_error: 10m
    key:
      headers: [Accept-Language]
    batch:
      path: /s
      param: ids
      id_field: id
      max_size: 8
      max_wait: 2ms
  - name: s-list
    path: /s
    split:
      param: ids
      route: s
  - name: q
    path: /q/{id:[1-9][0-9]*}
    ttl: 5m
    batch:
      path: /q
      param: ids
      id_field: id
      max_size: 2
      max_in_flight: 1
      max_wait: 2ms
  - name: q-list
    path: /q
    split:
      param: ids
      route: q
`

// maxTunnels and tunnelIdle are replicaConfig's upstream.max_tunnels and
// tunnel_idle_timeout (the upgrade row).
const (
	maxTunnels = 2
	tunnelIdle = 250 * time.Millisecond
)

const (
	maxBodyBytes    = 16 << 10
	maxKeyBytes     = 4 << 10
	maxLag          = time.Second
	upstreamTimeout = 3 * time.Second
	// leaseHold is the replicas' lease hold: cache.l2's default, 4 ×
	// redis.timeout (250ms), at least 500 ms (internal/cache/l2).
	leaseHold = time.Second
	// batchMaxWait is the max_wait of the batch routes u, e, s and q: a
	// batched id's lease is taken for max_wait + 2 × upstream.timeout
	// (internal/proxy, leaseTTL).
	batchMaxWait = 2 * time.Millisecond
)

// env is a Redis, the origin and two replicas sharing them.
type env struct {
	origin   *origin.Origin
	redis    *redistest.Server
	replicas []string
	admins   []string // the replicas' admin base URLs, same order
	trickle  string   // a third replica with read_timeout trickleTimeout
	tadmin   string   // its admin base URL
	capped   string   // a replica with max_connections maxConns (conn-cap row)
	cadmin   string   // its admin base URL
	budgeted string   // a replica with max_pending_send_bytes 1 and max_pending_header_bytes 16 KiB (send-budget, header-budget rows)
	badmin   string   // its admin base URL
	// gate, promote and padmin are the promote-race row's: a replica
	// whose Redis replies pass through gate (startPromote).
	gate            *redistest.Gate
	promote, padmin string
	yaml            string // the replicas' config (a replica started later: env_restart_test.go)
	policy          string // maxmemory-policy before the redis-oom row's stretch (env_restart_test.go)
	// servers and files are the replicas' (same order), for the
	// reload-torn row (reloadTorn).
	servers []*server.Server
	files   []string
}

// trickleTimeout is the trickle replica's server.read_timeout: each
// trickled write holds its round this long.
const trickleTimeout = "500ms"

// maxConns is the capped replica's server.max_connections (conn-cap row).
const maxConns = 4

func startEnv(t testing.TB, seed uint64) *env {
	t.Helper()
	e := &env{redis: redistest.Start(t), origin: origin.NewOrigin(seed)}
	t.Cleanup(e.origin.Close)
	if envMix(t).Has("evict-epochs") {
		e.evicting(t)
	}
	yaml := fmt.Sprintf(replicaConfig, e.origin.URL, e.redis.Addr(), maxBodyBytes, maxKeyBytes, maxLag, upstreamTimeout)
	e.yaml = yaml
	for range 2 {
		file := filepath.Join(t.TempDir(), "sidecache.yaml")
		proxy, admin, srv := startServer(t, yaml, file)
		e.replicas, e.admins = append(e.replicas, proxy), append(e.admins, admin)
		e.servers, e.files = append(e.servers, srv), append(e.files, file)
	}
	e.trickle, e.tadmin = startReplica(t, yaml+"server:\n  read_timeout: "+trickleTimeout+"\n")
	if envMix(t).Has("conn-cap") {
		e.capped, e.cadmin = startReplica(t, yaml+fmt.Sprintf("server:\n  max_connections: %d\n", maxConns))
	}
	if m := envMix(t); m.Has("send-budget") || m.Has("header-budget") {
		e.budgeted, e.badmin = startReplica(t, yaml+"server:\n  max_pending_send_bytes: 1\n  max_pending_header_bytes: 16384\n")
	}
	if m := envMix(t); m.Has("promote-race") || m.Has("batch-opener-budget") {
		e.startPromote(t, yaml)
	}
	return e
}

// startPromote starts the promote-race row's replica: its Redis commands
// and replies through a gate the row holds and releases, its
// subscription to Redis directly (subscribe_addrs), and a redis.timeout
// long enough that a read whose reply the row holds does not time out.
func (e *env) startPromote(t testing.TB, yaml string) {
	t.Helper()
	e.gate = redistest.StartGate(t, e.redis.Addr())
	direct := "      addrs: [" + e.redis.Addr() + "]\n      timeout: 250ms\n"
	if !strings.Contains(yaml, direct) {
		t.Fatal("the replicas' config no longer names Redis as the promote-race row expects")
	}
	gated := strings.Replace(yaml, direct, "      addrs: ["+e.gate.Addr()+"]\n      subscribe_addrs: ["+e.redis.Addr()+"]\n      timeout: 2s\n", 1)
	e.promote, e.padmin = startReplica(t, gated)
}

// startReplica starts one replica and returns its proxy's and its admin
// listener's base URLs.
func startReplica(t testing.TB, yaml string) (proxy, admin string) {
	t.Helper()
	proxy, admin, _ = startServer(t, yaml, "")
	return proxy, admin
}

// startServer is startReplica returning the server too; with file set,
// the config is written there first and the server reloads from it
// (Server.Reload; no watcher: the row drives the reloads).
func startServer(t testing.TB, yaml, file string) (proxy, admin string, srv *server.Server) {
	t.Helper()
	if file != "" {
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte(yaml), "invariant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("INVARIANT_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	srv, err = server.New(ctx, cfg, server.Options{Logger: logger, WatchInterval: -1, ConfigPath: file})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return "http://" + srv.ProxyAddr(), "http://" + srv.AdminAddr(), srv
}

// reloadTorn writes replica i's config file cut just before r-write's
// invalidate line (torn: valid YAML, the rule and every later route
// missing) or whole, and reloads it (invariant.Config.ReloadTorn).
func (e *env) reloadTorn(i int, torn bool) error {
	content := e.yaml
	if torn {
		w := strings.Index(content, "  - name: r-write\n")
		j := strings.Index(content[w:], "    invalidate:")
		if w < 0 || j < 0 {
			return fmt.Errorf("the replicas' config lost r-write's invalidate line")
		}
		content = content[:w+j]
	}
	if err := os.WriteFile(e.files[i], []byte(content), 0o644); err != nil {
		return err
	}
	return e.servers[i].Reload()
}

// shadowRoute takes route r-write's PATCHes of /r/{id} when put before it
// (first match wins) and invalidates nothing: the reload-shadow row.
const shadowRoute = "  - {name: r-shadow, methods: [PATCH], path: \"/r/{id:[1-9][0-9]*}\", ttl: 5m}\n"

// reloadShadow writes replica i's config file with shadowRoute just
// before r-write (shadow) or whole, and reloads it
// (invariant.Config.ReloadShadow).
func (e *env) reloadShadow(i int, shadow bool) error {
	content := e.yaml
	if shadow {
		if !strings.Contains(content, "  - name: r-write\n") {
			return fmt.Errorf("the replicas' config lost route r-write")
		}
		content = strings.Replace(content, "  - name: r-write\n", shadowRoute+"  - name: r-write\n", 1)
	}
	if err := os.WriteFile(e.files[i], []byte(content), 0o644); err != nil {
		return err
	}
	return e.servers[i].Reload()
}

// reloadToken writes replica i's config file with admin.token as the
// documented token: "${SIDECACHE_ADMIN_TOKEN:-}" expands from a Secret
// made from a file, its final newline inside the quotes (secret), or
// whole, and reloads it (invariant.Config.ReloadToken).
func (e *env) reloadToken(i int, secret bool) error {
	content := e.yaml
	if secret {
		if !strings.Contains(content, "  token: secret\n") {
			return fmt.Errorf("the replicas' config lost admin.token: secret")
		}
		content = strings.Replace(content, "  token: secret\n", "  token: \"secret\n\"\n", 1)
	}
	if err := os.WriteFile(e.files[i], []byte(content), 0o644); err != nil {
		return err
	}
	return e.servers[i].Reload()
}

// envMix is the default mix, changed by INVARIANT_FEATURES (see the package
// doc).
func envMix(t testing.TB) mix.Mix {
	m, unknown := mix.ParseMix(os.Getenv("INVARIANT_FEATURES"))
	if len(unknown) > 0 {
		t.Fatalf("INVARIANT_FEATURES names unknown features %v", unknown)
	}
	return m
}

// run drives one seed through e and returns its report, with the
// end-of-run bound checks (Redis keys) added.
func (e *env) run(t testing.TB, seed uint64, rounds int, m mix.Mix) invariant.Report {
	t.Helper()
	cfg := invariant.Config{
		Seed: seed, Rounds: rounds, Mix: m, Replicas: e.replicas, Admins: e.admins, AdminToken: "secret", Origin: e.origin,
		Host: "svc.invariant", MaxLag: maxLag, LagMargin: maxLag / 2, MaxBodyBytes: maxBodyBytes, UpstreamTimeout: upstreamTimeout,
		Trickle: e.trickle, TrickleAdmin: e.tadmin, Evict: e.evict, Ghost: e.ghost,
		LeaseHold: leaseHold, LeaseTTL: upstreamTimeout, BatchLeaseTTL: max(upstreamTimeout, batchMaxWait+2*upstreamTimeout),
		MaxTunnels: maxTunnels, TunnelIdle: tunnelIdle,
		Capped: e.capped, CappedAdmin: e.cadmin, MaxConns: maxConns,
		Budgeted: e.budgeted, BudgetedAdmin: e.badmin,
		SaveRedis: e.saveRedis, RestartRedis: e.restartRedis(m.Has("evict-epochs")), StartReplica: e.lateReplica(t),
		RedisOOM: e.redisOOM, RefuseWrites: e.refuseWrites,
		ReloadTorn: e.reloadTorn, ReloadShadow: e.reloadShadow, ReloadToken: e.reloadToken, StartRetagged: e.retagged(t),
		StallRedis:     e.stallRedis,
		PromoteReplica: e.promote, PromoteAdmin: e.padmin, L2Holds: e.l2Holds,
	}
	if e.gate != nil {
		cfg.PromoteGate = e.gate // a nil *Gate is no gate
	}
	rep := invariant.Run(context.Background(), cfg)
	rep.Violations = append(rep.Violations, e.redisBounds(t)...)
	return rep
}

// evicting makes the empty Redis evict (a small maxmemory, keys past it),
// then lifts the limit: it has evicted since it started, as a Redis under
// maxmemory has, so the evict-epochs row's deletions are evictions to the
// replicas (internal/cache/l2's touchScript reads INFO stats
// evicted_keys), not keys deleted by hand, which nothing covers.
func (e *env) evicting(t testing.TB) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	ctx := context.Background()
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "2mb").Err(); err != nil {
		t.Fatal(err)
	}
	junk := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("Redis never evicted")
		}
		if err := rc.Set(ctx, fmt.Sprintf("junk:%d", i), junk, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if info := rc.Info(ctx, "stats").Val(); !strings.Contains(info, "evicted_keys:0\r") {
			break
		}
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// evict deletes the keys under the replicas' prefix (the default,
// "sidecache:") matching pattern that drop picks, as maxmemory eviction
// would (the evict-epochs row).
func (e *env) evict(ctx context.Context, pattern string, drop func(key string) bool) (int, error) {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	var keys []string
	iter := rc.Scan(ctx, 0, "sidecache:"+pattern, 1000).Iterator()
	for iter.Next(ctx) {
		if drop(iter.Val()) {
			keys = append(keys, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		return 0, fmt.Errorf("scan: %w", err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	n, err := rc.Del(ctx, keys...).Result()
	if err != nil {
		return 0, fmt.Errorf("del: %w", err)
	}
	return int(n), nil
}

// ghost writes the lease of cache key key as a replica that crashed
// while holding it leaves it (internal/cache/l2's lease key, under the
// replicas' prefix: the holder's token, living what its last renewal
// left), unless the key's lease is not free: the ghost-lease row.
func (e *env) ghost(ctx context.Context, key, token string, left time.Duration) (bool, error) {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	ok, err := rc.SetNX(ctx, "sidecache:l:"+key, token, left).Result()
	if err != nil {
		return false, fmt.Errorf("set lease: %w", err)
	}
	return ok, nil
}

// redisBounds: no key in Redis is longer than max_key_bytes plus the
// sidecar's own prefixes and suffixes (256 bytes is generous for those).
func (e *env) redisBounds(t testing.TB) []check.Violation {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	ctx := context.Background()
	var out []check.Violation
	iter := rc.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if k := iter.Val(); len(k) > maxKeyBytes+256 {
			out = append(out, check.Violation{Kind: "bound", Msg: fmt.Sprintf("Redis key of %d bytes (max_key_bytes %d): %.80q", len(k), maxKeyBytes, k)})
		}
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scan: %v", err)
	}
	return out
}

// loopbackAliases: the identities connect from 127.0.0.2-5, which Linux
// routes without setup; elsewhere the test cannot run as designed.
func loopbackAliases(t testing.TB) {
	t.Helper()
	for i := 2; i <= 5; i++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", i))
		if err != nil {
			t.Fatalf("identities need 127.0.0.%d: %v", i, err)
		}
		ln.Close()
	}
}

func report(t testing.TB, seed uint64, rep invariant.Report) {
	t.Helper()
	t.Logf("seed %d: %d requests in %d rounds, %d upstream calls (most in a round: %d of a budget of %d), checked %v, violations %v",
		seed, rep.Requests, rep.Rounds, rep.Calls, rep.MaxRound, rep.MaxRoundBudget, rep.Checked, rep.Kinds())
	shown := map[string]int{}
	for _, v := range rep.Violations {
		if shown[v.Kind]++; shown[v.Kind] <= 5 {
			t.Errorf("seed %d: %s", seed, strings.TrimSpace(v.String()))
		}
	}
}

// l2Holds reports whether Redis holds an entry (under the replicas'
// prefix) whose cache key ends in suffix: the batch-opener-budget row.
func (e *env) l2Holds(ctx context.Context, suffix string) (bool, error) {
	rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr()})
	defer rc.Close()
	iter := rc.Scan(ctx, 0, "sidecache:e:*"+suffix, 1000).Iterator()
	for iter.Next(ctx) {
		return true, nil
	}
	if err := iter.Err(); err != nil {
		return false, fmt.Errorf("scan: %w", err)
	}
	return false, nil
}
