// Package detached makes an upstream request outlive the client that sent
// it, for a bounded time, and records whether it was written whole.
//
// A write whose client hangs up after sending it whole is not cancelled:
// the upstream's own answer then decides what the write did (a 405 did
// nothing), rather than a cancellation that leaves the outcome unknown.
// Once the client has gone the request gets a grace period more, so a
// hung upstream does not hold it for ever. A request cut before it was
// written whole cannot have been applied by an upstream that waits for
// the end of the message; Sent tells the two apart, and Started tells a
// request whose header went out (one an upstream that acts on a body cut
// short may have applied in part).
package detached

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// Call is one detached request's state. Its methods are safe for
// concurrent use (the Transport reports the write on its own goroutine).
type Call struct {
	sent    atomic.Bool
	started atomic.Bool
	stop    func()
}

// Request returns out on a context that client's cancellation does not
// end: grace after client is done, or when Stop is called, whichever comes
// first. The caller must call Stop once the request is over.
func Request(out *http.Request, client context.Context, grace time.Duration) (*http.Request, *Call) {
	c := &Call{}
	ctx, cancel := context.WithCancel(context.WithoutCancel(out.Context()))
	var mu sync.Mutex
	var timer *time.Timer
	unhook := context.AfterFunc(client, func() {
		mu.Lock()
		timer = time.AfterFunc(grace, cancel)
		mu.Unlock()
	})
	c.stop = func() {
		unhook()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaders: func() { c.started.Store(true) },
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				c.sent.Store(true)
			}
		},
	})
	return out.WithContext(ctx), c
}

// Sent reports whether the request was written to the upstream whole at
// least once (httptrace's WroteRequest), so that it may have been applied.
func (c *Call) Sent() bool { return c.sent.Load() }

// Started reports whether the request's header was written at least once
// (httptrace's WroteHeaders; perhaps not yet flushed), so that the
// upstream may have seen the request begin, and, if it acts on a body cut
// short, have applied part of it.
func (c *Call) Started() bool { return c.started.Load() }

// Stop ends the request's context and releases its timer.
func (c *Call) Stop() { c.stop() }
