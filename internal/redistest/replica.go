package redistest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// StartReplica starts a redis-server that replicates the one at
// masterAddr (replicaof; masterAddr may be a proxy in front of the
// master), and returns once its link to the master is up and the first
// sync is done: from then on whatever the master runs, PUBLISH included,
// reaches it through the replication stream. Extra args are appended as
// for Start. Start the master with NoSyncDelay(), or every full sync waits
// 5 s (Redis 7's default) for more replicas to join.
func StartReplica(t testing.TB, masterAddr string, args ...string) *Server {
	t.Helper()
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		t.Fatalf("redistest: replica of %q: %v", masterAddr, err)
	}
	r := Start(t, append([]string{"--replicaof", host, port}, args...)...)
	r.WaitSynced(t)
	return r
}

// NoSyncDelay are the arguments for a master whose replicas should sync
// at once: diskless sync starts without waiting for more replicas.
func NoSyncDelay() []string { return []string{"--repl-diskless-sync-delay", "0"} }

// WaitSynced returns once the replica reports its link to the master up
// (master_link_status:up, which Redis sets when a sync has completed).
func (s *Server) WaitSynced(t testing.TB) {
	t.Helper()
	waitFor(t, time.Now().Add(2*readyWithin), func() (bool, string) {
		info, err := do(s.addr, "INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up"), fmt.Sprint(info, err)
	})
}
