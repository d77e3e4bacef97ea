// Package fleet is the bench's -fleet mode: the cost of coherence as the
// number of replicas on one Redis grows. A few real sidecache replicas and
// N emulated peers (peer.go) that speak the same pub/sub protocol share one
// private redis-server; for each N the bench measures an idle phase
// (heartbeats only) and a write phase (the bench publishes invalidations
// at a fixed rate): Redis CPU from its own INFO cpu, messages delivered,
// the reach latency of each invalidation to every emulated peer, and the
// real replicas' CPU.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sidecache/sidecache/bench/internal/proc"
)

// Params configure a fleet run.
type Params struct {
	Ns        []int         // emulated peers, one row each
	Real      int           // real replicas
	Sidecache string        // their binary
	Protocol  string        // the emulated peers': ProtocolOwn or ProtocolShared
	MaxLag    time.Duration // coherence.max_lag of every replica
	Writes    int           // invalidations/s in the write phase
	Phase     time.Duration // length of each phase
	// Relays, if > 0, starts that many read replicas of the Redis master
	// (the relay tier, cache.l2.redis.subscribe_addrs): every subscription
	// sits on one of them, every PUBLISH stays on the master.
	Relays int
	// RelayHub makes the relays replicas of one more read replica (the
	// hub, which carries no subscription) instead of the master, so the
	// master feeds one replication link whatever Relays is.
	RelayHub bool
	Dir      string // scratch directory (logs, configs)
}

// Row is one N's figures.
type Row struct {
	N, Real int
	Idle    Phase
	Busy    Phase
	// Published is how many invalidations the writer published in the
	// write phase; Delivered how many the emulated peers received, of
	// Published·N expected, after a drain of up to 5 s.
	Published, Delivered int64
	ReachP50, ReachP99   time.Duration
	// Baseline is Redis' CPU (% of a core) with no client: its timers;
	// RelayBaseline each read replica's, replicating an idle master.
	Baseline      float64
	RelayBaseline []float64
	HubBaseline   float64
	Err           string
}

// Phase is what one phase measured.
type Phase struct {
	Secs          float64
	RedisCPU      float64 // % of a core
	Commands      float64 // Redis commands processed per second
	Deliveries    float64 // messages per second received by every subscriber (emulated peers' mean × all subscribers)
	PerPeer       float64 // messages per second received by one emulated peer
	RedisUsPerMsg float64 // Redis CPU µs per (delivery + command); with relays, the master's per command
	// RelayCPU is each read replica's CPU (% of a core) with Relays > 0,
	// and RelayUsPerMsg the mean read replica's CPU µs per delivery.
	RelayCPU      []float64
	RelayUsPerMsg float64
	HubCPU        float64 // with RelayHub: the hub's CPU, % of a core
	ReplicaCPU    float64 // % of a core, mean of the real replicas
	BenchCPU      float64 // % of a core: the emulated peers and the writer
	MachineBusy   float64 // % of all cores busy, every process on the machine
	OutBufMax     float64 // INFO clients client_recent_max_output_buffer, bytes
}

const prefix = "sidecache:"

// Run measures every N in p.Ns, each on a fresh Redis and fresh replicas.
func Run(ctx context.Context, p Params) []Row {
	var rows []Row
	for _, n := range p.Ns {
		if ctx.Err() != nil {
			break
		}
		r, err := runOne(ctx, p, n)
		if err != nil {
			r.Err = err.Error()
		}
		rows = append(rows, r)
	}
	return rows
}

type snapshot struct {
	at                time.Time
	redisCPU, redisOp float64
	relayCPU          []float64
	hubCPU            float64
	replicas          time.Duration
	bench             time.Duration
	busy, total       float64
	msgs              int64
}

func runOne(ctx context.Context, p Params, n int) (Row, error) {
	row := Row{N: n, Real: p.Real}
	port, err := proc.FreePort()
	if err != nil {
		return row, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rs, err := proc.Start(p.Dir, fmt.Sprintf("redis-%d", n), nil, "redis-server", "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no",
		"--maxclients", strconv.Itoa(2*n+100), "--dir", p.Dir, "--repl-diskless-sync-delay", "0")
	if err != nil {
		return row, err
	}
	defer rs.Stop()
	if err := until(ctx, 10*time.Second, func() error { _, err := redisDo(ctx, addr, "PING"); return err }); err != nil {
		return row, fmt.Errorf("redis: %w", err)
	}
	relays, hub, stopRelays, err := startRelays(ctx, p, n, port)
	defer stopRelays()
	if err != nil {
		return row, err
	}
	cpuOf := func(addr string) float64 {
		cpu, _ := info(ctx, addr, "cpu")
		return cpu["used_cpu_sys"] + cpu["used_cpu_user"]
	}
	redisCPU := func() float64 { return cpuOf(addr) }
	t0, c0 := time.Now(), redisCPU()
	h0 := 0.0
	if hub != "" {
		h0 = cpuOf(hub)
	}
	r0 := make([]float64, len(relays))
	for i, ra := range relays {
		r0[i] = cpuOf(ra)
	}
	sleep(ctx, max(p.Phase/2, time.Second))
	secs := time.Since(t0).Seconds()
	row.Baseline = 100 * (redisCPU() - c0) / secs
	for i, ra := range relays {
		row.RelayBaseline = append(row.RelayBaseline, 100*(cpuOf(ra)-r0[i])/secs)
	}
	if hub != "" {
		row.HubBaseline = 100 * (cpuOf(hub) - h0) / secs
	}
	// subAddr is where emulated peer i subscribes: the master, or one
	// relay each in turn (the real replicas hash their id over them).
	subAddr := func(i int) string {
		if len(relays) == 0 {
			return addr
		}
		return relays[i%len(relays)]
	}

	var replicas []*proc.Proc
	defer func() {
		for _, c := range replicas {
			c.Stop()
		}
	}()
	for i := range p.Real {
		c, err := startReplica(p, addr, relays, fmt.Sprintf("replica-%d-%d", n, i))
		if err != nil {
			return row, err
		}
		replicas = append(replicas, c)
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hist := &histogram{}
	peers := make([]*peer, 0, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range n {
		pe, err := dialPeer(pctx, subAddr(i), addr, prefix, p.Protocol, fmt.Sprintf("emu%05d", i), hist)
		if err != nil {
			return row, fmt.Errorf("peer %d: %w", i, err)
		}
		peers = append(peers, pe)
		pe.run(pctx, max(p.MaxLag/4, time.Millisecond), &wg)
	}
	if err := until(ctx, 30*time.Second, func() error {
		total := 0
		for _, a := range append([]string{addr}, relays...) {
			got, err := redisDo(ctx, a, "PUBSUB", "NUMSUB", prefix+"invalidate")
			if err != nil {
				return err
			}
			f := strings.Fields(got)
			if len(f) != 2 {
				return fmt.Errorf("PUBSUB NUMSUB answered %v", f)
			}
			k, _ := strconv.Atoi(f[1])
			if a == addr && len(relays) > 0 && k != 0 {
				return fmt.Errorf("%d subscribers on the master, want all on the relays", k)
			}
			total += k
		}
		if total != n+p.Real {
			return fmt.Errorf("subscribers %d, want %d", total, n+p.Real)
		}
		return nil
	}); err != nil {
		return row, err
	}
	time.Sleep(p.MaxLag) // every replica's proof established, beats in step

	snap := func() (snapshot, error) {
		s := snapshot{at: time.Now(), bench: selfCPU()}
		cpu, err := info(ctx, addr, "cpu")
		if err != nil {
			return s, err
		}
		st, err := info(ctx, addr, "stats")
		if err != nil {
			return s, err
		}
		s.redisCPU = cpu["used_cpu_sys"] + cpu["used_cpu_user"]
		for _, ra := range relays {
			s.relayCPU = append(s.relayCPU, cpuOf(ra))
		}
		if hub != "" {
			s.hubCPU = cpuOf(hub)
		}
		s.redisOp = st["total_commands_processed"]
		for _, c := range replicas {
			s.replicas += procCPU(c.Pid())
		}
		s.busy, s.total = machine()
		for _, pe := range peers {
			s.msgs += pe.msgs.Load()
		}
		return s, nil
	}
	phase := func(a, b snapshot) Phase {
		secs := b.at.Sub(a.at).Seconds()
		ph := Phase{Secs: secs}
		ph.RedisCPU = max(100*(b.redisCPU-a.redisCPU)/secs-row.Baseline, 0)
		ph.Commands = (b.redisOp - a.redisOp) / secs
		if n > 0 {
			ph.PerPeer = float64(b.msgs-a.msgs) / float64(n) / secs
			ph.Deliveries = ph.PerPeer * float64(n+p.Real)
		}
		work := ph.Deliveries + ph.Commands
		if len(relays) > 0 {
			work = ph.Commands // the relays deliver
			var sum float64
			for i := range relays {
				c := max(100*(b.relayCPU[i]-a.relayCPU[i])/secs-row.RelayBaseline[i], 0)
				ph.RelayCPU = append(ph.RelayCPU, c)
				sum += c
			}
			if ph.Deliveries > 0 {
				ph.RelayUsPerMsg = sum / 100 / ph.Deliveries * 1e6
			}
			if hub != "" {
				ph.HubCPU = max(100*(b.hubCPU-a.hubCPU)/secs-row.HubBaseline, 0)
			}
		}
		if work > 0 {
			ph.RedisUsPerMsg = ph.RedisCPU / 100 / work * 1e6
		}
		if p.Real > 0 {
			ph.ReplicaCPU = 100 * (b.replicas - a.replicas).Seconds() / secs / float64(p.Real)
		}
		ph.BenchCPU = 100 * (b.bench - a.bench).Seconds() / secs
		if b.total > a.total {
			ph.MachineBusy = 100 * (b.busy - a.busy) / (b.total - a.total)
		}
		if cl, err := info(ctx, addr, "clients"); err == nil {
			ph.OutBufMax = cl["client_recent_max_output_buffer"]
		}
		return ph
	}

	a, err := snap()
	if err != nil {
		return row, err
	}
	sleep(ctx, p.Phase)
	b, err := snap()
	if err != nil {
		return row, err
	}
	row.Idle = phase(a, b)

	wctx, wcancel := context.WithTimeout(ctx, p.Phase)
	published := make(chan int64, 1)
	go func() { published <- write(wctx, addr, p.Writes) }()
	a, err = snap()
	if err != nil {
		wcancel()
		return row, err
	}
	<-wctx.Done()
	wcancel()
	row.Published = <-published
	b, err = snap()
	if err != nil {
		return row, err
	}
	row.Busy = phase(a, b)

	// Drain: every published invalidation should reach every peer.
	wantInv := row.Published * int64(n)
	deadline := time.Now().Add(5 * time.Second)
	for {
		row.Delivered = 0
		for _, pe := range peers {
			row.Delivered += pe.invs.Load()
		}
		if row.Delivered >= wantInv || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	row.ReachP50, _ = hist.quantile(0.50)
	row.ReachP99, _ = hist.quantile(0.99)
	for _, pe := range peers {
		if pe.own.Load() == 0 && p.Protocol != ProtocolShared {
			return row, fmt.Errorf("peer %s heard none of its own beats", pe.id)
		}
	}
	return row, nil
}

// write publishes rate invalidations a second until ctx ends, each naming
// the time it was sent (the peers measure reach from it), and returns how
// many Redis took.
func write(ctx context.Context, addr string, rate int) int64 {
	if rate <= 0 {
		<-ctx.Done()
		return 0
	}
	var n int64
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return n
		case <-t.C:
		}
		msg := fmt.Sprintf(`{"tags":["fleet:%d"],"origin":"bench-writer"}`, time.Now().UnixNano())
		if _, err := redisDo(context.WithoutCancel(ctx), addr, "PUBLISH", prefix+"invalidate", msg); err == nil {
			n++
		}
	}
}

// startReplica runs one real sidecache on Redis, idle: no request reaches
// it, so its CPU is what coherence costs it.
func startReplica(p Params, addr string, relays []string, name string) (*proc.Proc, error) {
	ports, err := proc.FreePorts(3)
	if err != nil {
		return nil, err
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:%d
admin:
  listen: 127.0.0.1:%d
  token: fleet
upstream:
  url: http://127.0.0.1:%d
cache:
  l2:
    redis:
      addrs: [%s]
      subscribe_addrs: [%s]
coherence:
  max_lag: %s
`, ports[0], ports[1], ports[2], addr, strings.Join(relays, ", "), p.MaxLag)
	path := filepath.Join(p.Dir, name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		return nil, err
	}
	c, err := proc.Start(p.Dir, name, nil, p.Sidecache, "-config", path, "-log-level", "warn")
	if err != nil {
		return nil, err
	}
	return c, nil
}

// startRelays starts p.Relays read replicas of the master on
// masterPort (or of a hub, one more read replica of the master, with
// p.RelayHub) and returns their addresses once each has synced, the hub's
// ("" without), and a function that stops them all.
func startRelays(ctx context.Context, p Params, n, masterPort int) (relays []string, hub string, stop func(), err error) {
	var procs []*proc.Proc
	stop = func() {
		for _, c := range procs {
			c.Stop()
		}
	}
	replica := func(name string, maxClients, of int) (string, error) {
		port, err := proc.FreePort()
		if err != nil {
			return "", err
		}
		a := "127.0.0.1:" + strconv.Itoa(port)
		c, err := proc.Start(p.Dir, name, nil, "redis-server", "--port", strconv.Itoa(port),
			"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--maxclients", strconv.Itoa(maxClients), "--dir", p.Dir, "--repl-diskless-sync-delay", "0",
			"--replicaof", "127.0.0.1", strconv.Itoa(of))
		if err != nil {
			return "", err
		}
		procs = append(procs, c)
		return a, until(ctx, 30*time.Second, func() error {
			rep, err := redisDo(ctx, a, "INFO", "replication")
			if err != nil {
				return err
			}
			if !strings.Contains(rep, "master_link_status:up") {
				return fmt.Errorf("read replica %s not in sync", a)
			}
			return nil
		})
	}
	if p.Relays == 0 {
		return nil, "", stop, nil
	}
	of := masterPort
	if p.RelayHub {
		if hub, err = replica(fmt.Sprintf("hub-%d", n), 100, masterPort); err != nil {
			return nil, "", stop, err
		}
		_, port, _ := strings.Cut(hub, ":")
		of, _ = strconv.Atoi(port)
	}
	for i := range p.Relays {
		a, err := replica(fmt.Sprintf("relay-%d-%d", n, i), 2*n/p.Relays+100, of)
		if err != nil {
			return nil, "", stop, err
		}
		relays = append(relays, a)
	}
	return relays, hub, stop, nil
}

func until(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
