package origin

import (
	"net/http"
	"sync"
	"time"
)

// Bump raises res's version behind the cache: no write reaches a replica,
// as when an app changes its data out of band and an operator then purges
// the cache (the harness's purge row). It returns the new version. Its
// Last-Modified moves as a write's does (write).
func (o *Origin) Bump(res string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ver[res]++
	o.lm[res] = time.Now().Truncate(time.Second).Add(time.Second)
	return o.ver[res]
}

// WatchRead returns a channel closed once a GET of res has taken its
// version: from then on a fill of res is in flight (or answered), holding
// the version it took, so a Bump and a purge after it race that fill.
func (o *Origin) WatchRead(res string) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reading == nil {
		o.reading = map[string]chan struct{}{}
	}
	ch, ok := o.reading[res]
	if !ok {
		ch = make(chan struct{})
		o.reading[res] = ch
	}
	return ch
}

// readLocked closes res's WatchRead channel; o.mu held.
func (o *Origin) readLocked(res string) {
	if ch, ok := o.reading[res]; ok {
		close(ch)
		delete(o.reading, res)
	}
}

// Version is res's version now: the redis-stall row reads the version its
// own write made (no other request writes its resource).
func (o *Origin) Version(res string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ver[res]
}

// writeHold is a HoldWrite: the writes of its resource wait for gate,
// and arrived is closed when the first one comes.
type writeHold struct {
	gate, arrived chan struct{}
	once          sync.Once
}

// HoldWrite holds every write of res, before it is applied, until gate
// is closed (nil: none held), and returns a channel closed once one
// arrives.
func (o *Origin) HoldWrite(res string, gate chan struct{}) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gate == nil {
		delete(o.writeHolds, res)
		return nil
	}
	if o.writeHolds == nil {
		o.writeHolds = map[string]*writeHold{}
	}
	h := &writeHold{gate: gate, arrived: make(chan struct{})}
	o.writeHolds[res] = h
	return h.arrived
}

// heldWrite waits while res's writes are held (HoldWrite), and reports
// whether the write goes on (false: its client left meanwhile).
func (o *Origin) heldWrite(r *http.Request, res string) bool {
	o.mu.Lock()
	h := o.writeHolds[res]
	o.mu.Unlock()
	if h == nil {
		return true
	}
	h.once.Do(func() { close(h.arrived) })
	select {
	case <-h.gate:
		return true
	case <-r.Context().Done():
		return false
	}
}
