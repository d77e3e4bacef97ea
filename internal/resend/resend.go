// Package resend bounds how often an http.Transport sends one request.
//
// http.Transport sends an idempotent request (GET, HEAD, OPTIONS, TRACE,
// or one with an Idempotency-Key) again on another connection when a
// reused keep-alive connection fails before any byte of the answer
// arrives: the race with an upstream's idle timeout, which RFC 9112 §9.3.1
// lets a client retry. It does so with no bound, for as long as the next
// connection it takes from its idle pool is a reused one too. An upstream
// that reads a request and then closes the connection is sent that
// request once per idle connection: one client request, up to
// MaxIdleConnsPerHost + 1 upstream calls (the invariant harness saw one
// fetch reach its origin four times, and a test with eight idle
// connections nine), which breaks the security model's bound on one
// request's upstream cost.
//
// Once keeps the transport's first resend — a stale keep-alive connection
// still never fails a client request — and stops it there, as the lean
// pass-through (internal/lean) does: a request is written to at most two
// connections.
package resend

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// MaxSends is the most connections one request is written to: its own
// and one resend.
const MaxSends = 2

// ErrSpent is returned when the transport would have sent a request a
// third time: the upstream closed two connections without answering it.
var ErrSpent = errors.New("resend: upstream closed the connection without an answer twice")

// Once returns rt (an HTTP/1 http.Transport) with its resends bounded to
// one per request. CloseIdleConnections reaches rt's, if it has one.
func Once(rt http.RoundTripper) http.RoundTripper { return &once{rt: rt} }

type once struct{ rt http.RoundTripper }

// RoundTrip counts the connections the transport takes for r (GotConn is
// called once per attempt, on the calling goroutine, before the request is
// written). A third one is closed before anything is written on it, so the
// write fails, and the request's context is cancelled, which the
// transport checks before it takes another connection: the attempt ends
// with no byte sent and the transport's loop with it. One idle connection
// is lost that way, not the pool. The context otherwise ends with r's
// (the transport ends its own, derived one, once the body is read).
func (o *once) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, stop := context.WithCancelCause(r.Context())
	var conns atomic.Int32
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if conns.Add(1) > MaxSends {
			stop(ErrSpent)
			_ = info.Conn.Close()
		}
	}})
	resp, err := o.rt.RoundTrip(r.WithContext(ctx))
	if err != nil {
		if errors.Is(context.Cause(ctx), ErrSpent) {
			err = ErrSpent
		}
		stop(nil)
		return nil, err
	}
	return resp, nil
}

// CloseIdleConnections closes rt's idle connections (SetUpstream).
func (o *once) CloseIdleConnections() {
	if c, ok := o.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
