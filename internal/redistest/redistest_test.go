package redistest

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
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
		// The cluster bus port was probed free (startClusterNode), not
		// Redis's default port+10000, which may be taken or above 65535.
		nodes, err := do(a, "CLUSTER", "NODES")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(port)
		if strings.Contains(nodes, a+"@"+strconv.Itoa(p+10000)) {
			t.Errorf("%s: cluster bus on port+10000:\n%s", a, nodes)
		}
	}
}

func TestStartSentinel(t *testing.T) {
	s := StartSentinel(t, "mymaster")
	if s.Name() != "mymaster" || len(s.SentinelAddrs()) != 3 || len(s.Sentinels()) != 3 {
		t.Fatalf("name %q, sentinels %v", s.Name(), s.SentinelAddrs())
	}
	for _, a := range s.SentinelAddrs() {
		if got, err := sentinelMaster(a, "mymaster"); err != nil || got != s.Master().Addr() {
			t.Fatalf("sentinel %s names master %q, %v; want %s", a, got, err, s.Master().Addr())
		}
	}

	// The replica follows the master.
	if _, err := do(s.Master().Addr(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Now().Add(5*time.Second), func() (bool, string) {
		got, err := do(s.Replica().Addr(), "GET", "k")
		return err == nil && got == "v", fmt.Sprintf("replica GET k = %q, %v", got, err)
	})

	// Killing the master makes the sentinels promote the replica, which
	// keeps the data.
	start := time.Now()
	s.Master().Kill()
	waitFor(t, time.Now().Add(20*time.Second), func() (bool, string) {
		addr, err := s.MasterAddr()
		return err == nil && addr == s.Replica().Addr(), fmt.Sprintf("master = %q, %v", addr, err)
	})
	t.Logf("sentinels promoted the replica %s after the master was killed", time.Since(start).Round(time.Millisecond))
	waitFor(t, time.Now().Add(5*time.Second), func() (bool, string) {
		info, err := do(s.Replica().Addr(), "INFO", "replication")
		return err == nil && strings.Contains(info, "role:master"), fmt.Sprint(info, err)
	})
	if got, err := do(s.Replica().Addr(), "GET", "k"); err != nil || got != "v" {
		t.Fatalf("promoted replica GET k = %q, %v", got, err)
	}
	if _, err := do(s.Replica().Addr(), "SET", "k2", "v2"); err != nil {
		t.Fatalf("promoted replica refuses writes: %v", err)
	}
}

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string // fmt %v of the reply, or the error
	}{
		{"simple", "+OK\r\n", "OK"},
		{"error", "-ERR bad\r\n", "error: ERR bad"},
		{"integer", ":42\r\n", "42"},
		{"bulk", "$3\r\nfoo\r\n", "foo"},
		{"null bulk", "$-1\r\n", "error: bad bulk length \"$-1\""},
		{"array", "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n", "[127.0.0.1 6379]"},
		{"null array", "*-1\r\n", "error: bad array length \"*-1\""},
		{"nested", "*1\r\n*1\r\n:1\r\n", "[[1]]"},
		{"short array", "*2\r\n:1\r\n", "error: EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := readReply(bufio.NewReader(strings.NewReader(tc.in)))
			got := fmt.Sprint(v)
			if err != nil {
				got = "error: " + err.Error()
			}
			if got != tc.want {
				t.Fatalf("readReply(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestStartReplica(t *testing.T) {
	m := Start(t, NoSyncDelay()...)
	r := StartReplica(t, m.Addr())
	if _, err := do(m.Addr(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Now().Add(readyWithin), func() (bool, string) {
		got, err := do(r.Addr(), "GET", "k")
		return err == nil && got == "v", fmt.Sprint(got, err)
	})
}
