package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sidecache/sidecache/bench/internal/lab"
)

// CPUReport is the CPU-per-request table (bench -cpu).
type CPUReport struct {
	Params  lab.Params
	CPU     lab.CPUParams
	Started time.Time
	Machine Machine
	Command string
	Results []lab.CPUResult
}

// Write writes CPU-<stamp>.md and cpu-latest.md under dir.
func (r *CPUReport) Write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	md := []byte(r.Markdown())
	var paths []string
	for _, name := range []string{"CPU-" + r.Started.UTC().Format("2006-01-02-1504") + ".md", "cpu-latest.md"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, md, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Markdown is the table: one line per path and server, the median round's
// CPU µs per request with the spread over rounds, and the ratios the
// goals are stated in.
func (r *CPUReport) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# CPU per request — %s", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	w("")
	w("`%s`", r.Command)
	w("")
	w("Each server's own CPU time (utime + stime of its processes and their descendants, from `/proc/<pid>/stat`) "+
		"over %v at a fixed open-loop %d req/s (vegeta, %d connections), divided by the requests answered. "+
		"GET /clients/{id} over %d keys (bodies of the demo's client records, 600 B–1 KB). "+
		"Hit: every key cached first, for "+lab.HitTTL+" (longer than the run; reports before 2026-11-26 05:00 kept 5 min, so the later rounds of a long run charged some misses to the hit rows). Pass: a proxy without routes in front of the bare Go server. "+
		"Batched miss: GET /users/{id} on ids never asked before, batching on (max_size 100, max_wait 2ms), L1 only (256 MiB), purged before each round, so its L1 fills all through the round: a process's first minutes. "+
		"Beside them the bare Go server at GOMAXPROCS=1 batching the same ids the same way, then serving them from memory (the batched floor, explained under the ratios). "+
		"Batched miss, L1 at its bound: the same load on a sidecar of its own whose L1 ("+lab.BoundL1+") is full and evicting before each round (warmed with ids never asked before; its state under the table): the steady state a sidecar serves misses in. "+
		"Split: GET /users?ids=… of %d ids at %d req/s, half of them cached before each round, half never asked before. "+
		"L2 hit: GET /clients/{id} on a replica with L1 off, every entry stored in Redis by another replica (L1 off too); "+
		"beside it, the bare Go server at GOMAXPROCS=1 reading each body from the same Redis (the Go reference, explained under the ratios). "+
		"Median of %d interleaved rounds, with the spread (min–max); in each round the sidecars of a row take turns to be measured first, which reads higher.",
		r.CPU.Time, r.CPU.Rate, r.CPU.Workers, r.Params.Keys, r.Params.Bulk, r.CPU.SplitRate, r.CPU.Rounds)
	w("")
	w("Machine: %s, %d CPUs, %s; %s; nginx %s; varnish %s.", r.Machine.CPU, r.Machine.NumCPU, r.Machine.Kernel,
		r.Machine.Go, orDash(r.Machine.Nginx), orDash(r.Machine.Varnish))
	w("")
	w("| path | server | CPU µs/request | spread | µs/id | requests per bulk call | Redis µs/request | hits | achieved req/s | errors |")
	w("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.Results {
		if c.Missing != "" && len(c.PerReq) == 0 && len(c.RedisPerReq) == 0 {
			w("| %s | %s | — | not measured (%s) | | | | | | |", c.Test, c.Server, c.Missing)
			continue
		}
		cpu, spread, perID, bulk, redis, hits := "—", "", "", "", "", ""
		if len(c.PerReq) > 0 {
			cpu = fmt.Sprintf("%.1f", usf(c.Median()))
			spread = fmt.Sprintf("%.1f–%.1f", usf(c.PerReq[0]), usf(c.PerReq[len(c.PerReq)-1]))
			if c.IDs > 1 {
				perID = fmt.Sprintf("%.1f", usf(c.Median())/float64(c.IDs))
			}
			if c.IDs <= 1 { // a split answer is one of many ids, not a hit
				hits = fmt.Sprintf("%.0f %%", 100*c.HitShare)
				if lo := fmt.Sprintf("%.0f %%", 100*c.MinHitShare); lo != hits {
					hits += " (lowest round " + lo + ")"
				}
			}
		}
		if len(c.PerBulk) > 0 {
			bulk = fmt.Sprintf("%.1f", c.PerBulk[(len(c.PerBulk)-1)/2])
		}
		if len(c.RedisPerReq) > 0 {
			redis = fmt.Sprintf("%.1f (%.1f–%.1f)", usf(c.RedisMedian()), usf(c.RedisPerReq[0]), usf(c.RedisPerReq[len(c.RedisPerReq)-1]))
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %d |", c.Test, c.Server, cpu, spread, perID, bulk, redis, hits, c.TPS, c.Errors)
	}
	for _, c := range r.Results {
		if c.Note != "" {
			w("")
			w("%s: %s.", c.Server, c.Note)
		}
	}
	w("")
	find := func(test, prefix string) time.Duration {
		for _, c := range r.Results {
			if c.Test == test && strings.HasPrefix(c.Server, prefix) && len(c.PerReq) > 0 {
				return c.Median()
			}
		}
		return 0
	}
	ratio := func(a, b time.Duration) string {
		if a == 0 || b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", float64(a)/float64(b))
	}
	var names []string // every sidecache row: "<name> (L1 hit)"
	for _, c := range r.Results {
		if n, ok := strings.CutSuffix(c.Server, " (L1 hit)"); ok && c.Test == "hit" {
			names = append(names, n)
		}
	}
	w("| sidecar | pass ÷ hit (goal ≤ 1.5×) | hit ÷ nginx hit (goal ≤ 1.3×) | pass ÷ nginx pass (goal ≤ 2×) |")
	w("|---|---:|---:|---:|")
	for _, n := range names {
		hit, pass := find("hit", n+" ("), find("pass", n+" (")
		w("| %s | %s | %s | %s |", n, ratio(pass, hit), ratio(hit, find("hit", "nginx")), ratio(pass, find("pass", "nginx")))
	}
	w("")
	var rows []string             // the rows only sidecache has, when measured
	for _, c := range r.Results { // sidecars measured on these rows only
		if n, _, ok := strings.Cut(c.Server, " ("); ok && !c.RedisOnly && c.Test != "hit" && c.Test != "pass" && !bareRow(c.Server) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	bareMem, bareRedis := r.cpuOf(lab.BareMemoryServer), r.cpuOf(lab.BareRedisServer)
	floor := ratio(bareRedis, bareMem)
	for _, n := range names {
		batch, bound, split, l2 := find("batched miss", n+" ("), find(lab.BoundTest, n+" ("), find("split", n+" ("), find("l2 hit", n+" (")
		if batch == 0 && bound == 0 && split == 0 && l2 == 0 {
			continue
		}
		hit := find("hit", n+" (")
		var perID time.Duration
		if split > 0 {
			perID = split / time.Duration(max(r.bulk(), 1))
		}
		l2Redis := r.redisOf(n + " (L2 hit")
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n, ratio(batch, hit), ratio(bound, hit), ratio(perID, hit),
			ratio(l2, hit), ratio(l2Redis, r.redisOf("redis GET, paced per command")),
			ratio(l2Redis, r.redisOf("redis GET, paced in 1 ms batches")), ratio(l2Redis, r.redisOf("redis-benchmark")),
			extraRatio(n, l2, hit, bareRedis, bareMem), floor))
	}
	if len(rows) > 0 {
		w("| sidecar | batched miss ÷ hit (goal ≤ 1.3×) | batched miss, L1 at its bound ÷ hit | split per id ÷ hit | L2 hit ÷ L1 hit (goal ≤ 1.5×) | Redis per L2 hit ÷ paced GET (goal ≤ 1.5×) | Redis per L2 hit ÷ GET in 1 ms batches | Redis per L2 hit ÷ redis-benchmark GET | L2 hit's extra ÷ bare Go's Redis GET extra (µs over the L1 hit, GOMAXPROCS=1) | floor of the L2 ÷ L1 goal (bare Go GOMAXPROCS=1: Redis GET ÷ from memory) |")
		w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, row := range rows {
			w("%s", row)
		}
		w("")
		w("Batched miss ÷ hit is the miss on a sidecar whose L1 fills all through the round: every miss stores into memory first touched, " +
			"grows the L1's maps and the live heap (a process's first minutes: 3,000 misses/s with the routes' 5 min TTL fill 256 MiB in about a minute). " +
			"Batched miss, L1 at its bound ÷ hit is the same miss once the L1 is full and each store evicts (or is refused), " +
			"as a sidecar runs from then on: the figure an operator sees. " +
			"Split per id is the whole request's CPU over its ids, half of them cached and half fetched in shared bulk calls. " +
			"Redis's CPU is its process's (INFO cpu), heartbeats and pub/sub of the replicas included. " +
			"The paced GET, the goal's reference, releases each GET at its own instant as vegeta releases the sidecar's requests; " +
			"reports before 2026-11-25 20:00 released a millisecond's GETs at once (the 1 ms batches column), " +
			"which share Redis's event-loop wake-ups and so made the reference cheaper than the traffic it stands for.")
		w("")
	}
	if len(rows) > 0 && bareRedis > 0 { // the l2 row ran: its Go reference did too
		w("The Go reference: *%s* is the bench's bare net/http server (the hit row's *%s*, one core as sidecache by default) "+
			"reading each answer's body from the same Redis as the L2 hit, with one GET per request on a pooled connection, "+
			"in the same rounds. Its CPU beyond the from-memory row is what the Redis round trip alone costs a Go server "+
			"(the socket writes and reads, the wake-up on the reply, the parsing); no cache can serve an L2 hit for less. "+
			"The extra column is sidecache's L2 hit minus its L1 hit over that bare Go extra, both in µs at GOMAXPROCS=1: "+
			"1.00× would mean an L2 hit adds only the round trip itself, and what lies above is sidecache's own "+
			"(its Redis client, decoding the entry, coherence); a sidecar at another GOMAXPROCS gets no figure. "+
			"The floor column is bare Go's Redis GET ÷ from memory: the L2 ÷ L1 ratio of a server that does nothing "+
			"but the round trip, so the L2 ÷ L1 goal cannot be met below it by a server as lean as bare Go; "+
			"sidecache's L1 hit costs more than bare Go's, so the same round trip moves its ratio less "+
			"((L1 hit + bare Go's extra) ÷ L1 hit).", lab.BareRedisServer, lab.BareMemoryServer)
		w("")
	}
	r.batchFloor(w, names, ratio)
	r.l2Split(w, names, ratio)
	w("Numbers from a machine running other work are noisy: read the spread, and the ratios within one run.")
	return b.String()
}

// bareRow reports whether server is one of the bare Go reference rows,
// which are no sidecar.
func bareRow(server string) bool {
	switch server {
	case lab.BareMemoryServer, lab.BareRedisServer, lab.BareBatchServer, lab.BareBatchHitServer, lab.BareBatchLeanServer:
		return true
	}
	return false
}

// cpuOf is the median CPU per request of the row named server, whatever
// its path (the bare Go from-memory row is a hit row, or an l2 row when
// the hit row did not run).
func (r *CPUReport) cpuOf(server string) time.Duration {
	for _, c := range r.Results {
		if c.Server == server && len(c.PerReq) > 0 {
			return c.Median()
		}
	}
	return 0
}

// extraRatio is the extra column: what sidecar's L2 hit adds to its L1
// hit over what one Redis GET adds to bare Go's answer from memory, with
// both differences in µs. Only for a sidecar at one core, like the bare
// Go rows; a difference at or below zero (noise) gives no ratio.
func extraRatio(sidecar string, l2, hit, bareRedis, bareMem time.Duration) string {
	if _, procs, ok := strings.Cut(sidecar, "GOMAXPROCS="); ok && procs != "1" {
		return "— (GOMAXPROCS≠1)"
	}
	if l2 == 0 || hit == 0 || bareRedis == 0 || bareMem == 0 {
		return "—"
	}
	sc, bare := l2-hit, bareRedis-bareMem
	if bare <= 0 || sc <= 0 {
		return fmt.Sprintf("— (%.1f ÷ %.1f µs)", usf(sc), usf(bare))
	}
	return fmt.Sprintf("%.2f× (%.1f ÷ %.1f µs)", float64(sc)/float64(bare), usf(sc), usf(bare))
}

// bulk is the ids per split request.
func (r *CPUReport) bulk() int {
	for _, c := range r.Results {
		if c.Test == "split" && c.IDs > 0 {
			return c.IDs
		}
	}
	return r.Params.Bulk
}

// redisOf is the median Redis CPU per request of the first row whose
// server starts with prefix.
func (r *CPUReport) redisOf(prefix string) time.Duration {
	for _, c := range r.Results {
		if strings.HasPrefix(c.Server, prefix) && len(c.RedisPerReq) > 0 {
			return c.RedisMedian()
		}
	}
	return 0
}

// l2Split is where Redis's CPU per L2 hit goes, when the l2 row measured
// the L2 hit's own MGET from the paced loop: the command's share (that
// MGET ÷ the paced GET) and the serving conditions' (the L2 hit ÷ that
// MGET: the same command sent by a sidecar under vegeta's load, on its
// connections), beside the same split of a plain GET (bare Go's GET ÷ the
// paced GET).
func (r *CPUReport) l2Split(w func(string, ...any), names []string, ratio func(a, b time.Duration) string) {
	loopMGET, loopGET := r.redisOf(lab.L2ReadLoopServer), r.redisOf("redis GET, paced per command")
	if loopMGET == 0 {
		return
	}
	bareGET := r.redisOf(lab.BareRedisServer)
	w("| sidecar | Redis per L2 hit ÷ paced GET (goal ≤ 1.5×) | = the command: paced MGET ÷ paced GET | × serving it: L2 hit ÷ paced MGET | a plain GET served: bare Go's GET ÷ paced GET |")
	w("|---|---:|---:|---:|---:|")
	for _, n := range names {
		l2Redis := r.redisOf(n + " (L2 hit")
		if l2Redis == 0 {
			continue
		}
		w("| %s | %s | %s | %s | %s |", n, ratio(l2Redis, loopGET), ratio(loopMGET, loopGET), ratio(l2Redis, loopMGET), ratio(bareGET, loopGET))
	}
	w("")
	w("Where Redis's CPU per L2 hit goes: *%s* sends, from the paced GET's loop (same connections, each command at its own instant), "+
		"the very MGET an L2 hit sends — the entry key and its tags' epoch keys, read from the entries the readers serve. "+
		"Its ratio to the paced GET is what the command costs Redis beyond a GET; the L2 hit's ratio to it is what serving "+
		"the same command from a sidecar under the HTTP load adds, to be read beside bare Go's GET ÷ the paced GET, the same "+
		"for a plain GET.", lab.L2ReadLoopServer)
	w("")
}

func usf(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
