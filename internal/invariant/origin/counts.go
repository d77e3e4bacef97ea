package origin

import (
	"strings"
	"time"
)

// ResetCrowd forgets the crowd rounds' calls: a run starts.
func (o *Origin) ResetCrowd() {
	o.mu.Lock()
	clear(o.crowd)
	o.mu.Unlock()
}

// CrowdCallsOf is the number of bulk calls of crowd round round so far,
// resends apart.
func (o *Origin) CrowdCallsOf(round int) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.crowd[round]
}

// countQueueBad counts a /q call of ids (comma-separated) against each
// crowd bad id among them.
func (o *Origin) countQueueBad(ids string) {
	for id := range strings.SplitSeq(ids, ",") {
		if len(id) == 20 && id[0] == '8' {
			o.mu.Lock()
			o.queueBad[id]++
			o.mu.Unlock()
		}
	}
}

// QueueCallsWith is the number of /q calls that held the crowd bad id
// id so far.
func (o *Origin) QueueCallsWith(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queueBad[id]
}

// Settle waits until no call is being served and none began or ended for
// quiet (counted from the call of Settle at the earliest), or for at most
// limit. It returns the calls received meanwhile.
func (o *Origin) Settle(quiet, limit time.Duration) int64 {
	before, start := o.Calls.Load(), time.Now().UnixNano()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		since := time.Now().UnixNano() - max(start, o.lastCall.Load())
		if o.active.Load() == 0 && since >= int64(quiet) {
			break
		}
	}
	return o.Calls.Load() - before
}

// NewRound forgets the request ids seen so far (a resend follows its
// first send within the client request that caused both) and returns the
// ids sent more than MaxSends times since the last call.
func (o *Origin) NewRound() (overSent []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.sent)
	overSent, o.overSent = o.overSent, nil
	return overSent
}
