package fleet

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs the emulator end to end on a private redis-server,
// without real replicas: every peer hears its own beats (Run fails the
// row otherwise) and every invalidation the writer published reached
// every peer.
func TestRunSmall(t *testing.T) {
	for _, proto := range []string{ProtocolOwn, ProtocolShared, ProtocolPing} {
		rows := Run(context.Background(), Params{
			Ns: []int{3}, Protocol: proto, MaxLag: 100 * time.Millisecond,
			Writes: 20, Phase: 300 * time.Millisecond, Dir: t.TempDir(),
		})
		if len(rows) != 1 || rows[0].Err != "" {
			t.Fatalf("%s: rows %+v", proto, rows)
		}
		r := rows[0]
		if r.Published == 0 || r.Delivered != 3*r.Published {
			t.Fatalf("%s: %d published, %d delivered to 3 peers", proto, r.Published, r.Delivered)
		}
		if r.ReachP99 == 0 || r.ReachP50 > r.ReachP99 {
			t.Fatalf("%s: reach p50 %s p99 %s", proto, r.ReachP50, r.ReachP99)
		}
	}
}

// TestReadPush parses what Redis sends a subscriber.
func TestReadPush(t *testing.T) {
	in := "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n" +
		"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$5\r\nhe\r\no\r\n"
	rd := bufio.NewReader(bytes.NewBufferString(in))
	kind, ch, _, err := readPush(rd)
	if err != nil || kind != "subscribe" || ch != "c" {
		t.Fatalf("first push: %q %q %v", kind, ch, err)
	}
	kind, ch, payload, err := readPush(rd)
	if err != nil || kind != "message" || ch != "c" || string(payload) != "he\r\no" {
		t.Fatalf("second push: %q %q %q %v", kind, ch, payload, err)
	}
	if _, _, _, err := readPush(rd); err == nil {
		t.Fatal("no error at the end of input")
	}
}

// TestHistogram: quantiles are bucket upper bounds, in order.
func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	p50, n := h.quantile(0.5)
	p99, _ := h.quantile(0.99)
	if n != 100 || p50 < 50*time.Millisecond || p50 > 51*time.Millisecond || p99 < 99*time.Millisecond || p99 > 100*time.Millisecond {
		t.Fatalf("n %d p50 %s p99 %s", n, p50, p99)
	}
}

// TestRunRelays puts every subscription on 2 read replicas of a hub, a read
// replica of the master: every peer still hears its own beats, published
// on the master, and every invalidation, and the row reports each relay's
// CPU.
func TestRunRelays(t *testing.T) {
	rows := Run(context.Background(), Params{
		Ns: []int{4}, Protocol: ProtocolOwn, MaxLag: 100 * time.Millisecond, Relays: 2, RelayHub: true,
		Writes: 20, Phase: 300 * time.Millisecond, Dir: t.TempDir(),
	})
	if len(rows) != 1 || rows[0].Err != "" {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	if r.Published == 0 || r.Delivered != 4*r.Published {
		t.Fatalf("%d published, %d delivered to 4 peers", r.Published, r.Delivered)
	}
	if len(r.Idle.RelayCPU) != 2 || len(r.Busy.RelayCPU) != 2 || len(r.RelayBaseline) != 2 {
		t.Fatalf("relay CPU idle %v busy %v baseline %v, want 2 each", r.Idle.RelayCPU, r.Busy.RelayCPU, r.RelayBaseline)
	}
	rep := (&Report{Params: Params{Relays: 2, RelayHub: true, Protocol: ProtocolOwn}, Rows: rows}).Markdown()
	if !bytes.Contains([]byte(rep), []byte("relay CPU idle, each")) || !bytes.Contains([]byte(rep), []byte("**hub**")) {
		t.Fatalf("report has no relay table:\n%s", rep)
	}
}

// TestRunRestartSmall runs -fleet-restart end to end with two real
// replicas (the sidecache binary built from this tree) and a 1 s pause:
// every stage has reads, no read errs, and after Redis answers every
// replica reads hits again (its last miss is recorded, then hits only).
func TestRunRestartSmall(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sidecache")
	build := exec.Command("go", "build", "-o", bin, "github.com/sidecache/sidecache/cmd/sidecache")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sidecache: %v\n%s", err, out)
	}
	for _, mode := range []string{RestartPause, RestartKill} {
		t.Run(mode, func(t *testing.T) {
			r := RunRestart(context.Background(), RestartParams{
				Real: 2, Sidecache: bin, MaxLag: 200 * time.Millisecond, Stop: time.Second,
				Mode: mode, Keys: 3, Rate: 20, After: 2 * time.Second, Dir: t.TempDir(),
			})
			if r.Err != "" {
				t.Fatal(r.Err)
			}
			if r.Errors != 0 {
				t.Fatalf("%d reads failed", r.Errors)
			}
			for i, n := range r.Reads {
				if n == 0 {
					t.Fatalf("stage %d: no reads (%+v)", i, r.Reads)
				}
			}
			if r.Hits[0] == 0 || r.Hits[2] == 0 || len(r.Recovered) != 2 {
				t.Fatalf("hits %v, recovered %v", r.Hits, r.Recovered)
			}
			if md := r.Markdown("bench -fleet-restart 2", "test", time.Now(), [2]string{"0", "0"}); !strings.Contains(md, "Every read a hit again") {
				t.Fatalf("report:\n%s", md)
			}
		})
	}
}
