package server

import (
	"context"
	"time"
)

// FlushL2 waits until the L2 writes queued so far were sent, so a test can
// read what a fill stored (or did not) without waiting on a clock.
func (s *Server) FlushL2(ctx context.Context) error {
	if s.l2 == nil {
		return nil
	}
	return s.l2.Flush(ctx)
}

// PollConfig runs one check of the config watcher (watch.go), so a test
// drives the polls instead of waiting on WatchInterval.
func (s *Server) PollConfig() bool { return s.pollConfig() }

// RunningLeaseTTL is the cache.l2.lease_ttl in force: the running config's
// and the proxy's, which a reload must keep equal.
func (s *Server) RunningLeaseTTL() (config, proxy time.Duration) {
	return s.cfg.Load().Cache.L2.LeaseTTL.D(), s.proxy.LeaseTTL()
}
