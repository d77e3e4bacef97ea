package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Report is one fleet run, written as FLEET-<stamp>.md.
type Report struct {
	Params  Params
	Command string
	Label   string // what the sidecache binary is (a commit)
	Started time.Time
	LoadAvg [2]string // before and after
	Rows    []Row
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	p := r.Params
	fmt.Fprintf(&b, "# Fleet coherence — %s, emulated peers beat on %s\n\n", r.Label, map[string]string{ProtocolOwn: "their own channel", ProtocolShared: "the shared channel", ProtocolPing: "PINGs on their subscription connection (the real replicas beat on their own channel)"}[p.Protocol])
	fmt.Fprintf(&b, "`%s` — %s, %d CPUs (%s), load average %s before, %s after.\n\n",
		r.Command, r.Started.UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), runtime.GOARCH, r.LoadAvg[0], r.LoadAvg[1])
	fmt.Fprintf(&b, "Each row: a fresh redis-server, %d real replicas (`%s`, idle: no HTTP requests) and N emulated peers, "+
		"`coherence.max_lag` %s (beats every %s). Idle phase %s (heartbeats only), then a write phase of %s "+
		"at %d invalidations/s published by the bench.\n\n",
		p.Real, p.Sidecache, p.MaxLag, p.MaxLag/4, p.Phase, p.Phase, p.Writes)
	if p.Relays > 0 {
		fmt.Fprintf(&b, "**Relay tier**: %d read replicas of the master (`--replicaof`) carry every subscription, the emulated "+
			"peers' in turn and the real replicas' by `cache.l2.redis.subscribe_addrs`; every PUBLISH (beats, "+
			"invalidations) runs on the master. *Redis* columns below are the master's, and its µs per msg is per "+
			"command (it delivers nothing); the relays' own table follows.\n\n", p.Relays)
		if p.RelayHub {
			b.WriteString("The relays replicate from a **hub**, one more read replica of the master that carries no " +
				"subscription, so the master feeds one replication link.\n\n")
		}
	}
	b.WriteString("The machine is shared (other processes run alongside): *machine busy* is every process's CPU over all cores " +
		"during the phase. Redis CPU per message (Redis CPU time ÷ (messages delivered + commands run)) is the figure " +
		"contention distorts least; whole-percentage figures move with the neighbours. Redis CPU is counted above " +
		"what the same redis-server used with no client at all (its timers), measured before each row.\n\n")
	b.WriteString("| N emulated | Redis CPU idle | deliveries/s idle | per replica msgs/s | Redis µs per msg | replica CPU idle | " +
		"Redis CPU writing | deliveries/s writing | invalidations delivered | reach p50 / p99 | replica CPU writing | " +
		"bench CPU | machine busy | max output buffer |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		if row.Err != "" {
			fmt.Fprintf(&b, "| %d | failed: %s |||||||||||||\n", row.N, strings.ReplaceAll(row.Err, "|", "/"))
			continue
		}
		deliv := "—"
		if want := row.Published * int64(row.N); want > 0 {
			deliv = fmt.Sprintf("%d / %d (%.1f %%)", row.Delivered, want, 100*float64(row.Delivered)/float64(want))
		}
		fmt.Fprintf(&b, "| %d | %.1f %% | %.0f | %.1f | %.2f | %.2f %% | %.1f %% | %.0f | %s | %s / %s | %.2f %% | %.0f %% | %.0f %% | %s |\n",
			row.N, row.Idle.RedisCPU, row.Idle.Deliveries, row.Idle.PerPeer, row.Idle.RedisUsPerMsg, row.Idle.ReplicaCPU,
			row.Busy.RedisCPU, row.Busy.Deliveries, deliv, ms(row.ReachP50), ms(row.ReachP99), row.Busy.ReplicaCPU,
			row.Busy.BenchCPU, row.Busy.MachineBusy, kb(row.Busy.OutBufMax))
	}
	if p.Relays > 0 {
		b.WriteString("\n| N emulated | relay CPU idle, each | relay µs per delivery idle | relay CPU writing, each | relay µs per delivery writing | relay baseline, each | hub CPU idle / writing |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")
		for _, row := range r.Rows {
			if row.Err != "" {
				continue
			}
			hub := "—"
			if p.RelayHub {
				hub = fmt.Sprintf("%.1f %% / %.1f %%", row.Idle.HubCPU, row.Busy.HubCPU)
			}
			fmt.Fprintf(&b, "| %d | %s | %.2f | %s | %.2f | %s | %s |\n", row.N, pcts(row.Idle.RelayCPU), row.Idle.RelayUsPerMsg,
				pcts(row.Busy.RelayCPU), row.Busy.RelayUsPerMsg, pcts(row.RelayBaseline), hub)
		}
	}
	b.WriteString("\nColumns: *deliveries/s* counts the messages every subscriber (emulated and real) received, " +
		"from the emulated peers' mean; *per replica* is what one subscriber received; *reach* is from the writer's " +
		"PUBLISH to an emulated peer reading the message (100 µs buckets); *replica CPU* is the mean over the real " +
		"replicas, from the scheduler's per-thread nanoseconds; *bench CPU* is the emulated peers and the writer " +
		"together; *max output buffer* is Redis' largest per-client output buffer at the end of the write phase.\n")
	return b.String()
}

// pcts renders one percentage per relay.
func pcts(v []float64) string {
	f := make([]string, len(v))
	for i, x := range v {
		f[i] = fmt.Sprintf("%.1f %%", x)
	}
	return strings.Join(f, ", ")
}

func ms(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func kb(v float64) string {
	if v < 1024 {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.0f KiB", v/1024)
}

// Write saves the report under dir as FLEET-<stamp>[-label].md.
func (r *Report) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := "FLEET-" + r.Started.UTC().Format("2006-01-02-1504") + "-" + r.Params.Protocol
	if k := r.Params.Relays; k > 0 {
		name += "-relay" + strconv.Itoa(k)
		if r.Params.RelayHub {
			name += "-hub"
		}
	}
	name += ".md"
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(r.Markdown()), 0o644)
}

// LoadAvg is /proc/loadavg's first three fields.
func LoadAvg() string { return loadavg() }
