package invariant

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/mix"
	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// Config is one run: the replicas to drive (base URLs of their proxy
// listeners, all in front of Origin) and what the checks need to know of
// their config.
type Config struct {
	Seed     uint64
	Rounds   int
	Mix      mix.Mix
	Replicas []string
	// Admins are the replicas' admin listeners' base URLs, in the order
	// of Replicas: the queue rounds read /metrics, and the purge row
	// purges through them (none: neither).
	Admins []string
	// AdminToken is the replicas' admin.token (the queue rounds purge
	// route q first; the purge row's purges).
	AdminToken string
	Origin     *origin.Origin
	Host       string // Host header of every request
	// MaxLag is the replicas' coherence.max_lag; LagMargin is added to it
	// before a peer's stale read counts (the replicas' clocks are this
	// process's clock, and a read is timed from before it was sent to
	// after the write's answer was read, so the margin only absorbs the
	// replicas' own heartbeat granularity, never scheduling delay).
	MaxLag, LagMargin time.Duration
	// UpstreamTimeout is the replicas' upstream.timeout: a crowd round's
	// 504 that came at least this long after the round began is a bulk
	// call the machine's load made slower than it (check.Config).
	UpstreamTimeout time.Duration
	// MaxBodyBytes is the replicas' cache.max_body_bytes: the profiles
	// draw sizes either side of it.
	MaxBodyBytes int
	// Trickle is the base URL of a replica like the others but with a
	// short server.read_timeout, which the trickled writes go to (none
	// when empty). Its own short bound would cut the other rows' slow
	// answers, so it is not one of Replicas.
	Trickle string
	// Evict, when set, deletes the keys of the replicas' Redis that match
	// pattern (under the replicas' prefix) and for which drop says so, as
	// maxmemory eviction would, and returns how many it deleted: the
	// evict-epochs row.
	Evict func(ctx context.Context, pattern string, drop func(key string) bool) (int, error)
	// MaxTunnels and TunnelIdle are the replicas' upstream.max_tunnels
	// and tunnel_idle_timeout, with upstream.allow_upgrades [websocket]
	// (the upgrade row, upgrade.go; MaxTunnels 0: no upgrades allowed).
	MaxTunnels int
	TunnelIdle time.Duration
	// Capped and CappedAdmin are the base URLs of a replica like the
	// others but with server.max_connections MaxConns, a peer of theirs
	// the conn-cap row (conncap.go) fills with idle and held connections
	// (none when empty). Its small cap would hold up the other rows'
	// traffic, so it is not one of Replicas.
	Capped, CappedAdmin string
	MaxConns            int
	// Budgeted and BudgetedAdmin are the base URLs of a replica like the
	// others but with server.max_pending_send_bytes 1 and
	// max_pending_header_bytes 16 KiB, a peer of theirs the send-budget
	// row (sendbudget.go) sends clients that never read, and the
	// header-budget row (headerbudget.go) clients stalled in their header
	// sections (none when empty). Its budget would cut the other rows' slow
	// clients, so it is not one of Replicas.
	Budgeted, BudgetedAdmin string
	// SaveRedis, RestartRedis and StartReplica, when set, are the
	// redis-restart row's (restart.go): SaveRedis snapshots the
	// replicas' Redis (SAVE); RestartRedis kills it and starts it again
	// on its port, empty or (snapshot) from the last SaveRedis;
	// StartReplica starts one more replica like the others and returns
	// its proxy's and admin's base URLs.
	//
	// RestartRedis calls down, when not nil, while Redis is down (the
	// old process gone, the new one not started): the requests a round
	// sends during the outage go then.
	SaveRedis    func(ctx context.Context) error
	RestartRedis func(ctx context.Context, snapshot bool, down func()) error
	StartReplica func() (proxy, admin string)
	// RedisOOM, when set, is the redis-oom row's (oom.go): on, it puts
	// the replicas' Redis over maxmemory under noeviction; off, it gives
	// the memory (and the policy it had) back.
	RedisOOM func(ctx context.Context, on bool) error
	// RefuseWrites, when set, is the redis-refuses-writes row's
	// (refuse.go): on, the replicas' Redis refuses every write while it
	// answers (NOREPLICAS); off, it takes them again.
	RefuseWrites func(ctx context.Context, on bool) error
	// ReloadTorn, when set, makes replica i apply its config file cut
	// just before r-write's invalidate line (torn), or whole again: the
	// reload-torn row (reload.go).
	ReloadTorn func(i int, torn bool) error
	// ReloadShadow, when set, makes replica i apply its config file with
	// a route before r-write that takes its PATCHes and invalidates
	// nothing (shadow), or whole again: the reload-shadow row (shadow.go).
	ReloadShadow func(i int, shadow bool) error
	// ReloadToken, when set, makes replica i apply its config file with
	// admin.token as a Secret made from a file gives it (secret: the
	// final newline inside the quotes), or whole again: the secret-token
	// row (secrettoken.go).
	ReloadToken func(i int, secret bool) error
	// StallRedis, when set, stalls the replicas' Redis for d without
	// stopping it: CLIENT PAUSE d ALL, or (freeze) its process stopped
	// and continued d later. It returns once the stall has begun; back
	// then delivers the time Redis answered again (or, frozen, was
	// continued). The redis-stall row (stall.go).
	StallRedis func(ctx context.Context, freeze bool, d time.Duration) (back <-chan time.Time, err error)
	// TrickleAdmin is the trickle replica's admin base URL: a Redis
	// restart waits for its replayed invalidations too (restart.go).
	TrickleAdmin string
	// Ghost, when set, writes into the replicas' Redis the lease of
	// cache key key as a holder that crashed left it: its token, left to
	// live for left, unless the key's lease is not free (written false).
	// The ghost-lease row (ghost.go).
	Ghost func(ctx context.Context, key, token string, left time.Duration) (written bool, err error)
	// LeaseHold is the replicas' lease hold (cache.l2's, by default
	// 4 × redis.timeout, at least 500 ms); LeaseTTL the ttl a plain
	// key's lease is taken for (cache.l2.lease_ttl, by default
	// upstream.timeout) and BatchLeaseTTL a batch route's id's (at least
	// max_wait + 2 × upstream.timeout): the ghost-lease row.
	LeaseHold, LeaseTTL, BatchLeaseTTL time.Duration
	// StartRetagged, when set, starts one more replica from the
	// replicas' config as a deploy changed it (r-summary renamed r-digest
	// and tagged rsum:{id}, which r-write invalidates instead of r:{id})
	// and returns its proxy's and admin's base URLs: the restart-retag
	// row (retag.go).
	StartRetagged func() (proxy, admin string)
	// PromoteGate, when set, holds and releases the Redis replies of one
	// more replica, PromoteReplica (admin PromoteAdmin), whose
	// subscription goes to Redis directly: the promote-race row
	// (promote.go), and the batch-opener-budget row (openerbudget.go).
	PromoteGate interface {
		Hold(marker string)
		HoldNamed(marker string)
		Release()
		Held() bool
	}
	PromoteReplica, PromoteAdmin string
	// L2Holds reports whether Redis holds an entry whose cache key ends
	// in suffix, read off Redis itself (openerbudget.go).
	L2Holds func(ctx context.Context, suffix string) (bool, error)
}

// Report is what a run did and found.
type Report struct {
	Requests   int // client requests sent
	Rounds     int
	Calls      int64 // origin requests received
	Violations []check.Violation
	// Checked counts the answers each version check applied to (own: a
	// write through the same replica preceded the read; lag: one through
	// the peer, more than max_lag before), so a run shows that its
	// checks were live; Lists counts list requests answered 200, and
	// MaxRound the most upstream calls one round used against its budget
	// (check.Checker.Result, plus the runner's crowd and budget counts).
	Checked                  map[string]int
	MaxRound, MaxRoundBudget int64
}

// Kinds counts the violations by kind.
func (r *Report) Kinds() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Kind]++
	}
	return m
}

// run is the state of one run.
type run struct {
	cfg Config
	// rng draws the origin's profiles and, through gen, the requests:
	// one sequence, fixed by the seed.
	rng *rand.Rand
	// unvaried draws the learned-unvaried row (drawUnvaried) on a
	// sequence of its own, also fixed by the seed, so that the row adds
	// its draws without moving any draw of the other rows: a seed's
	// requests and profiles are the ones it drew before the row existed.
	unvaried *rand.Rand
	// stale draws the split-stale and bulk-206 rows (drawStale) on a
	// sequence of its own, for the same reason.
	stale *rand.Rand
	// withheld: route s's answers may vary on X-Tenant, a header its key
	// does not hold (bulk-vary-withheld), in odd seeds. Its stale-if-error
	// check is off then (check.Config.NoHeld): once a route's Vary names
	// such a header, its variants marker changes with the Vary, and
	// whether a held copy is still found depends on which marker each
	// replica holds (L1 and L2), which the check does not follow (seen:
	// 502s with a copy held, in draws the fixed seeds do not make). Even
	// seeds keep the check; odd seeds the identity checks of the row.
	withheld bool
	// trickles draws the trickle-write row (drawTrickle) on a sequence of
	// its own, as unvaried does.
	trickles *rand.Rand
	// conts draws the origin-continue row (drawContinue), as unvaried.
	conts *rand.Rand
	// fields draws the withheld-field, coding-lines and 304-coding rows
	// (drawFields, PCG stream 40), as unvaried.
	fields *rand.Rand
	// recoded are the /n ids whose 304s say gzip this round (readRecoded).
	recoded []string
	// bodies draws the client-body row (drawClientBody), as unvaried.
	bodies *rand.Rand
	// evicts draws the evict-epochs row (evict) on a sequence of its
	// own, as unvaried does.
	evicts *rand.Rand
	// trickleIDs numbers the trickled writes (origin.TrickleHeader).
	trickleIDs atomic.Int64
	// purges draws the purge row (drawPurge) on a sequence of its own.
	purges *rand.Rand
	// asked draws the list-as-asked row (drawAsAsked) on a sequence of
	// its own, as unvaried does.
	asked *rand.Rand
	// wides draws the purge-all and purge-route rows (drawWide, stream
	// 27), and wide is the round's wide purge (nil: none).
	wides *rand.Rand
	wide  *widePurge
	// restartAt is how far the redis-restart row has come, saved when
	// its snapshot was taken and wrote when its probe's write was
	// answered (restart.go).
	restartAt    restartStage
	saved, wrote time.Time
	// oom is the redis-oom row's state (oom.go; stream 42).
	oom oomRow
	// refuse is the redis-refuses-writes row's state (refuse.go; stream 48).
	refuse refuseRow
	// restarts draws where among a round's requests a Redis restart
	// falls (stream 38), and restarted is the restart the last round
	// played (nil: none), whose reads follow the round (restart.go).
	restarts  *rand.Rand
	restarted *restartDraw
	// ghosts draws the ghost-lease row (stream 37), and ghostRounds
	// counts its rounds (their fresh ids: ghost.go).
	ghosts      *rand.Rand
	ghostRounds int
	// bigs draws bulk-big's element size (stream 32), so the other
	// streams' draws are unchanged.
	bigs *rand.Rand
	// reloads draws the reload-torn row (reload.go, stream 43).
	reloads *rand.Rand
	// shadow is the reload-shadow row's state (shadow.go, stream 45).
	shadow shadowRow
	// token is the secret-token row's state (secrettoken.go, stream 70).
	token tokenRow
	// batchReload is the batch-reload row's state (batchreload.go,
	// stream 67).
	batchReload batchReloadRow
	// stall is the redis-stall row's state (stall.go, stream 44).
	stall stallRow
	// promote is the promote-race row's state (promote.go, stream 57).
	promote promoteRow
	// opener is the batch-opener-budget row's state (openerbudget.go,
	// stream 58).
	opener openerRow
	// refused is the list-refused row's state (listrefused.go, stream 64).
	refused refusedRow
	// retags draws the restart-retag row (retag.go, stream 46), and
	// retagAt is the round after which it plays (-1: none).
	retags  *rand.Rand
	retagAt int
	// agents draws the vary-user-agent row (drawAgents, stream 41), as
	// unvaried.
	agents *rand.Rand
	// cookies2 draws the set-cookie2 row (drawProfile, stream 49): which
	// set-cookie answers mint an obsolete Set-Cookie2 instead.
	cookies2 *rand.Rand
	// listWrites draws the write-list row (drawListWrites, stream 50).
	listWrites *rand.Rand
	// strays draws the private-stray row (strayPrivate, stream 55).
	strays *rand.Rand
	// varySeps draws the vary-malformed row (drawProfile, stream 56).
	varySeps *rand.Rand
	// targeted draws the targeted-nostore row (targetedNoStore, stream 60).
	targeted *rand.Rand
	// bulkCookies draws the bulk-set-cookie row (bulkCookie, stream 63).
	bulkCookies *rand.Rand
	// nulls draws the bulk-null row (nulls.go, stream 72), and nullsMode
	// is its draw for the round being played.
	nulls     *rand.Rand
	nullsMode int
	gen       *traffic.Gen
	// crowds are the crowd rounds played, checked at the end (checkCrowds).
	crowds []roundCost

	// chk checks every answer and collects what the run found.
	chk *check.Checker
	rep Report
	// patches counts the PATCHes sent: a round ends only once the origin
	// has received them all, so a write whose client hung up (and which
	// the sidecar still forwards) counts in its own round's budget.
	patches int64
	// gone counts this round's requests whose client left before any
	// answer came (a half-close while the request waited): the flight
	// its request started goes on without it (see settle).
	gone atomic.Int64

	// tunnelRng draws the upgrade row (upgrades) on a sequence of its
	// own; tunnelIDs numbers its tunnels.
	tunnelRng *rand.Rand
	tunnelIDs atomic.Int64
	// caps draws the conn-cap row (conncap.go) on stream 52.
	caps *rand.Rand
	// mismatchRng draws the mismatch-vary row (mismatch.go) on stream
	// 59; mismatchDone counts its stages.
	mismatchRng  *rand.Rand
	mismatchDone int
	// stalledRng draws the stalled-length row (stalled.go) on stream
	// 61; stalledDone counts its stages.
	stalledRng  *rand.Rand
	stalledDone int
	// sends draws whether and how the send-budget row (sendbudget.go)
	// plays on stream 65, sendDraws its clients' identities and sizes on
	// stream 66; sendStages counts its stages (their fresh ids).
	sends, sendDraws *rand.Rand
	sendStages       int
	// heads draws whether and how the header-budget row (headerbudget.go)
	// plays, on stream 73; headStages counts its stages (their fresh ids).
	heads      *rand.Rand
	headStages int
}

// Run drives cfg.Rounds rounds of concurrent requests and checks every
// answer. The sequence of requests is a function of the seed; the
// interleaving is the scheduler's.
func Run(ctx context.Context, cfg Config) Report {
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 20)), unvaried: rand.New(rand.NewPCG(cfg.Seed, 21)), stale: rand.New(rand.NewPCG(cfg.Seed, 22)), trickles: rand.New(rand.NewPCG(cfg.Seed, 23)), conts: rand.New(rand.NewPCG(cfg.Seed, 24)), evicts: rand.New(rand.NewPCG(cfg.Seed, 25)), purges: rand.New(rand.NewPCG(cfg.Seed, 26)), asked: rand.New(rand.NewPCG(cfg.Seed, 30)), wides: rand.New(rand.NewPCG(cfg.Seed, 27)), bigs: rand.New(rand.NewPCG(cfg.Seed, 32))}
	r.tunnelRng = rand.New(rand.NewPCG(cfg.Seed, 28))
	r.caps = rand.New(rand.NewPCG(cfg.Seed, 52))
	r.mismatchRng = rand.New(rand.NewPCG(cfg.Seed, 59))
	r.stalledRng = rand.New(rand.NewPCG(cfg.Seed, 61))
	r.sends, r.sendDraws = rand.New(rand.NewPCG(cfg.Seed, 65)), rand.New(rand.NewPCG(cfg.Seed, 66))
	r.heads = rand.New(rand.NewPCG(cfg.Seed, 73))
	r.bodies = rand.New(rand.NewPCG(cfg.Seed, 33))
	r.reloads = rand.New(rand.NewPCG(cfg.Seed, 43))
	r.ghosts, r.restarts = rand.New(rand.NewPCG(cfg.Seed, 37)), rand.New(rand.NewPCG(cfg.Seed, 38))
	r.fields = rand.New(rand.NewPCG(cfg.Seed, 40))
	r.retags = rand.New(rand.NewPCG(cfg.Seed, 46))
	r.agents = rand.New(rand.NewPCG(cfg.Seed, 41))
	r.cookies2 = rand.New(rand.NewPCG(cfg.Seed, 49))
	r.listWrites = rand.New(rand.NewPCG(cfg.Seed, 50))
	r.strays = rand.New(rand.NewPCG(cfg.Seed, 55))
	r.varySeps = rand.New(rand.NewPCG(cfg.Seed, 56))
	r.targeted = rand.New(rand.NewPCG(cfg.Seed, 60))
	r.bulkCookies = rand.New(rand.NewPCG(cfg.Seed, 63))
	r.nulls = rand.New(rand.NewPCG(cfg.Seed, 72))
	r.drawRetag()
	r.drawStallRound()   // stall.go, stream 44
	r.drawShadowRound()  // shadow.go, stream 45
	r.drawPromoteRound() // promote.go, stream 57
	r.drawOpenerRound()  // openerbudget.go, stream 58
	r.drawBatchReload()  // batchreload.go, stream 67
	r.drawRefusedRound() // listrefused.go, stream 64
	r.drawTokenRound()   // secrettoken.go, stream 70
	r.gen = traffic.NewGen(r.rng, cfg.Mix, cfg.Seed, len(cfg.Replicas), cfg.Host)
	r.withheld = cfg.Mix.Has("bulk-vary-withheld") && cfg.Seed%2 == 1
	r.chk = check.New(check.Config{Host: cfg.Host, MaxLag: cfg.MaxLag, LagMargin: cfg.LagMargin, NoHeld: r.withheld, HeldLocal: cfg.Mix.Has("evict-epochs"), UpstreamTimeout: cfg.UpstreamTimeout, MaxBodyBytes: cfg.MaxBodyBytes}, r.gen)
	cfg.Origin.ResetCrowd()
	partials := cfg.Origin.Partials.Load()
	nulls := cfg.Origin.Nulls.Load()
	stalls := cfg.Origin.Stalls.Load()
	continues := cfg.Origin.Continues.Load()
	defer r.gen.CloseIdle()
	for round := 0; round < cfg.Rounds && ctx.Err() == nil; round++ {
		if r.crowdDue(round) {
			r.crowd(ctx, round)
			continue
		}
		r.round(ctx, round)
		if r.queueDue(round) {
			r.queueRound(ctx, round) // beside the round: its draws are its own
		}
		if r.retryDue(round) {
			r.retryRound(ctx, round) // retry.go, stream 69
		}
		r.evict(ctx)
		r.restartRedis(ctx, round)    // restart.go
		r.redisOOM(ctx, round)        // oom.go
		r.redisRefuse(ctx, round)     // refuse.go
		r.reloadTorn(ctx)             // reload.go
		r.reloadShadow(ctx, round)    // shadow.go
		r.batchReloadPlay(ctx, round) // batchreload.go
		r.restartRetag(ctx, round)    // retag.go
		r.promoteRace(ctx, round)     // promote.go
		r.openerBudget(ctx, round)    // openerbudget.go
		r.listRefused(ctx, round)     // listrefused.go
		r.secretToken(ctx, round)     // secrettoken.go
	}
	r.checkCrowds()
	if n := cfg.Origin.Partials.Load() - partials; n > 0 {
		r.chk.Count("bulk-206-sent", int(n)) // the row reached the replicas
	}
	r.chk.Count("stalled", int(cfg.Origin.Stalls.Load()-stalls))
	r.chk.Count("bulk-null-sent", int(cfg.Origin.Nulls.Load()-nulls)) // null elements the bulk endpoint wrote
	r.chk.Count("continue-sent", int(cfg.Origin.Continues.Load()-continues))
	r.rep.Checked, r.rep.Violations = r.chk.Result()
	r.rep.Calls = cfg.Origin.Calls.Load()
	return r.rep
}

// evict deletes about half the epoch keys, between rounds, so no fill is
// in flight: an evicted epoch must read as a miss, and the fill that
// recreates it must not make an entry fetched before the tag's last write
// current again (the lag checks see it if it does, once the replicas'
// tombstones, upstream.timeout + 10 s, have expired).
func (r *run) evict(ctx context.Context) {
	if !r.cfg.Mix.Has("evict-epochs") || r.cfg.Evict == nil || r.evicts.IntN(4) != 0 {
		return
	}
	if r.oom.on {
		// Redis is over maxmemory under noeviction (oom.go): it evicts
		// nothing, and an evicted epoch would refuse the probe's entry
		// that the row checks is refused by its write.
		return
	}
	n, err := r.cfg.Evict(ctx, "v:*", func(k string) bool {
		// Route s's copies must stay held for stale_if_error (check's
		// stale-if-error), which an evicted epoch would turn into misses.
		held := strings.HasSuffix(k, "v:_route:s") || strings.HasSuffix(k, "v:_uri:/s") || strings.Contains(k, "v:_uri:/s/")
		return !held && r.evicts.IntN(2) == 0
	})
	if err != nil {
		r.violate("evict", "evicting epoch keys: %v", err)
		return
	}
	r.chk.Count("evicted-epochs", n)
}

func (r *run) violate(kind, format string, a ...any) { r.chk.Violate(kind, format, a...) }

// round draws the origin's profiles and a handful of requests, sends them
// all at once, and checks the round's upstream calls against its budget.
func (r *run) round(ctx context.Context, round int) {
	r.rep.Rounds++
	hot := r.drawResources()
	n := 1 + r.rng.IntN(10)
	reqs := make([]*traffic.Request, n)
	for i := range reqs {
		reqs[i] = r.gen.Draw(hot)
		r.drawTrickle(reqs[i])
		r.drawClientBody(reqs[i])
	}
	p := r.drawPurge(reqs)
	r.wide = r.drawWide(reqs) // purgeall.go
	reqs = append(reqs, r.drawStale()...)
	for _, q := range reqs {
		r.drawAsAsked(q)
	}
	var mid midRound
	rs := r.drawRestart(round, reqs) // restart.go
	if rs != nil {
		mid = rs
	} else if sd := r.drawStall(ctx, round, &reqs); sd != nil { // stall.go
		mid = sd
	}
	var g *ghostState
	if mid == nil {
		var extra []*traffic.Request
		extra, g = r.drawGhosts(ctx, reqs) // ghost.go
		reqs = append(reqs, extra...)
	}
	r.restarted = rs
	reqs = append(reqs, r.drawAgents()...) // last: the rows above drew over the others
	reqs = append(reqs, r.drawListWrites()...)
	reqs = append(reqs, r.drawNulls()...) // nulls.go, stream 72
	r.playAll(ctx, reqs, -1, p, mid)
	r.endGhosts(ctx, g)
	if p != nil && p.acked {
		r.readAfterPurge(ctx, p)
	}
	if w := r.wide; w != nil && w.acked {
		r.readAfterWide(ctx, w)
	}
	r.wide = nil
	r.readRecoded(ctx)          // recoded.go
	r.upgrades(ctx)             // beside the round: its draws are its own
	r.connCap(ctx)              // conncap.go, likewise
	r.sendBudget(ctx)           // sendbudget.go, likewise
	r.headerBudgetRow(ctx)      // headerbudget.go, likewise
	r.mismatchVary(ctx, round)  // mismatch.go, likewise
	r.stalledLength(ctx, round) // stalled.go, likewise
}
