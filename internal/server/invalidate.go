package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/sidecache/sidecache/internal/cache/l1"
	"github.com/sidecache/sidecache/internal/cache/l2"
	"github.com/sidecache/sidecache/internal/proxy"
)

// invalidator drops tags here first (so this replica reads its own write at
// once), then in L2, which tells the peers.
type invalidator struct {
	l1 *l1.Store
	l2 *l2.Store
}

func (v *invalidator) InvalidateTags(ctx context.Context, tags ...string) error {
	if v.l1 != nil {
		v.l1.DeleteTags(tags...)
	}
	if v.l2 != nil {
		if err := v.l2.InvalidateTags(ctx, tags...); err != nil {
			return fmt.Errorf("invalidate: %w", err)
		}
	}
	return nil
}

// peerInvalidation applies another replica's invalidation to this L1.
func (s *Server) peerInvalidation(inv l2.Invalidation) {
	if s.l1 == nil || s.proxy == nil {
		return
	}
	n := 0
	switch {
	case inv.All:
		s.proxy.InvalidatedAll()
		s.l1.Clear()
		n = 1
	default:
		s.proxy.Invalidated(inv.Tags...)
		n += s.l1.DeleteTags(inv.Tags...)
		if len(inv.Keys) > 0 {
			_ = s.l1.Delete(context.Background(), inv.Keys...)
			n += len(inv.Keys)
		}
	}
	s.m.Invalidation("peer", max(n, 1))
}

// purger serves the admin API's POST /purge.
type purger struct{ s *Server }

func (p *purger) PurgeTag(ctx context.Context, tag string) (int, error) {
	return p.purgeTags(ctx, tag)
}

func (p *purger) PurgeRoute(ctx context.Context, route string) (int, error) {
	if p.s.proxy.Routes().Route(route) == nil {
		return 0, fmt.Errorf("purge: %w: %q", errUnknownRoute, route)
	}
	return p.purgeTags(ctx, proxy.RouteTag(route))
}

var errUnknownRoute = errors.New("unknown route")

func (p *purger) purgeTags(ctx context.Context, tags ...string) (int, error) {
	n := 0
	p.s.proxy.Invalidated(tags...)
	if p.s.l1 != nil {
		n = p.s.l1.DeleteTags(tags...)
	}
	p.s.m.Invalidation("purge", len(tags))
	if p.s.l2 != nil {
		if err := p.s.l2.InvalidateTags(ctx, tags...); err != nil {
			return n, fmt.Errorf("purge: %w", err)
		}
	}
	return n, nil
}

func (p *purger) PurgeKey(ctx context.Context, key string) (int, error) {
	p.s.m.Invalidation("purge", 1)
	if err := p.s.tiers.Delete(ctx, key); err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	return 1, nil
}

func (p *purger) PurgeAll(ctx context.Context) error {
	p.s.proxy.InvalidatedAll()
	if p.s.l1 != nil {
		p.s.l1.Clear()
	}
	p.s.m.Invalidation("purge", 1)
	if p.s.l2 != nil {
		if err := p.s.l2.PurgeAll(ctx); err != nil {
			return fmt.Errorf("purge: %w", err)
		}
	}
	return nil
}
