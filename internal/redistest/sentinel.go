package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sentinels is how many sentinels StartSentinel runs: three is the
// smallest group where a failover needs a real election (two of three
// votes), as in production, rather than one process deciding alone.
const sentinels = 3

// Sentinel timing, short so a failover fits in a test: the master is
// judged down after downAfter without an answer, and a failed failover is
// retried after twice failoverTimeout.
const (
	downAfter       = time.Second
	failoverTimeout = 3 * time.Second
)

// Sentinel is a master, one replica and a group of Redis Sentinels
// monitoring them under one name.
type Sentinel struct {
	name      string
	master    *Server
	replica   *Server
	sentinels []*Server
}

// StartSentinel starts a master, a replica of it and three sentinels
// monitoring the master as masterName (quorum 1), and returns once every
// sentinel names the master, knows the replica and the other sentinels,
// and the replica is in sync: from then on killing the master makes the
// sentinels promote the replica within a few seconds. Everything is
// killed when the test ends.
func StartSentinel(t testing.TB, masterName string) *Sentinel {
	t.Helper()
	bin := lookPath(t, "redis-server")
	// Diskless sync starts at once instead of waiting 5 s (Redis 7's
	// default) for more replicas to join. Both servers get it, as either
	// may be the master.
	noDelay := []string{"--repl-diskless-sync-delay", "0"}
	s := &Sentinel{name: masterName, master: Start(t, noDelay...)}
	host, port, _ := net.SplitHostPort(s.master.Addr())
	s.replica = Start(t, append(noDelay, "--replicaof", host, port)...)

	// Sentinels read the replica from the master's INFO once connected, so
	// starting them after the sync saves waiting for their next refresh.
	deadline := time.Now().Add(2 * readyWithin)
	waitFor(t, deadline, func() (bool, string) {
		info, err := do(s.replica.Addr(), "INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up"), fmt.Sprint(info, err)
	})

	conf := fmt.Sprintf(""+
		"sentinel monitor %[1]s %[2]s %[3]s 1\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n",
		masterName, host, port, downAfter.Milliseconds(), failoverTimeout.Milliseconds())
	for range sentinels {
		dir := t.TempDir()
		// Sentinel rewrites its file to record what it learns, so each
		// gets its own, in a directory it may write.
		file := filepath.Join(dir, "sentinel.conf")
		s.sentinels = append(s.sentinels, launch(t, bin, func(port int) ([]string, error) {
			if err := os.WriteFile(file, []byte("dir "+dir+"\n"+conf), 0o600); err != nil {
				return nil, fmt.Errorf("sentinel config: %w", err)
			}
			return []string{file, "--sentinel", "--port", strconv.Itoa(port), "--bind", "127.0.0.1"}, nil
		}))
	}

	// Hello messages, which make sentinels known to each other, go out
	// every 2 s; a failover started before they arrive would be decided
	// by one sentinel alone.
	want := fmt.Sprintf("address=%s,slaves=1,sentinels=%d", s.master.Addr(), sentinels)
	for _, sn := range s.sentinels {
		waitFor(t, deadline, func() (bool, string) {
			addr, err := sentinelMaster(sn.Addr(), masterName)
			if err != nil || addr != s.master.Addr() {
				return false, fmt.Sprintf("sentinel %s: get-master-addr-by-name %s = %q, %v", sn.Addr(), masterName, addr, err)
			}
			info, err := do(sn.Addr(), "INFO", "sentinel")
			return err == nil && strings.Contains(info, want),
				fmt.Sprintf("sentinel %s: want %q in INFO: %v\n%s", sn.Addr(), want, err, info)
		})
	}
	return s
}

// Name is the monitored master's name, Options.MasterName for a client.
func (s *Sentinel) Name() string { return s.name }

// SentinelAddrs are the sentinels' host:port, the addresses a client is
// configured with.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, n := range s.sentinels {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Sentinels are the sentinel processes, for tests that kill one.
func (s *Sentinel) Sentinels() []*Server { return s.sentinels }

// Master is the server started as master. After a failover it is no
// longer the master; MasterAddr says which one is.
func (s *Sentinel) Master() *Server { return s.master }

// Replica is the server started as replica, the one a failover promotes.
func (s *Sentinel) Replica() *Server { return s.replica }

// MasterAddr asks the sentinels, in order, for the current master's
// host:port and returns the first answer.
func (s *Sentinel) MasterAddr() (string, error) {
	var errs []string
	for _, sn := range s.sentinels {
		addr, err := sentinelMaster(sn.Addr(), s.name)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", sn.Addr(), err))
	}
	return "", fmt.Errorf("no sentinel names master %q: %s", s.name, strings.Join(errs, "; "))
}

func sentinelMaster(addr, name string) (string, error) {
	hp, err := doStrings(addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name answered %q", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// waitFor polls ok until it holds, failing the test at deadline with the
// last state it described.
func waitFor(t testing.TB, deadline time.Time, ok func() (bool, string)) {
	t.Helper()
	for {
		done, state := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: not ready in time: %s", state)
		}
		time.Sleep(10 * pollEvery)
	}
}
