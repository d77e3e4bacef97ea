package origin

import "time"

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
