package proxy

import (
	"sync"
	"time"
)

// hitForPass remembers keys whose responses are too large to cache, so their
// next requests stream straight through instead of being read twice.
type hitForPass struct {
	m  sync.Map // key → time.Time (until)
	n  int64
	mu sync.Mutex
}

const maxHitForPass = 10000

func (p *hitForPass) active(key string, now time.Time) bool {
	v, ok := p.m.Load(key)
	if !ok {
		return false
	}
	if now.Before(v.(time.Time)) {
		return true
	}
	p.m.Delete(key)
	return false
}

func (p *hitForPass) add(key string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n >= maxHitForPass {
		p.m.Clear()
		p.n = 0
	}
	p.n++
	p.m.Store(key, until)
}
