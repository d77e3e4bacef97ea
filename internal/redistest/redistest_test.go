package redistest

import (
	"strings"
	"testing"
)

func TestServerLifecycle(t *testing.T) {
	s := Start(t)
	if got, err := do(s.Addr(), "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	if _, err := do(s.Addr(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}

	s.Kill()
	if _, err := do(s.Addr(), "PING"); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Kill() // a second kill is a no-op

	s.Restart()
	if got, err := do(s.Addr(), "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after Restart = %q, %v", got, err)
	}
	if got, err := do(s.Addr(), "GET", "k"); err == nil || got != "" {
		// GET of a missing key is a null bulk ($-1), which do rejects.
		t.Fatalf("restarted server kept data: %q, %v", got, err)
	}

	s.Stop()
	if _, err := do(s.Addr(), "PING"); err == nil {
		t.Fatal("PING answered after Stop")
	}
}

func TestStartArgs(t *testing.T) {
	s := Start(t, "--maxmemory", "12345678")
	// CONFIG GET replies with an array; the helper only reads strings,
	// so check the flag through INFO instead.
	info, err := do(s.Addr(), "INFO", "memory")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "maxmemory:12345678") {
		t.Fatalf("extra args not applied:\n%s", info)
	}
}

func TestStartCluster(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Addrs()) != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("addrs = %v", c.Addrs())
	}
	for _, a := range c.Addrs() {
		info, err := do(a, "CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:3", "cluster_size:3"} {
			if !strings.Contains(info, want) {
				t.Errorf("%s: CLUSTER INFO lacks %q:\n%s", a, want, info)
			}
		}
	}
}
