package edge

import "net"

// A client gone before its answer.
//
// While a handler runs, net/http keeps a read waiting on the client's
// connection (its connReader's background read, through Conn.Read): the
// first byte of a pipelined request is kept for the next one, and the
// end of the stream or a failure cancels the request's context, so a
// batched miss leaves its batch, a request waiting for another's fetch
// leaves the flight, a pass-through's upstream request is cancelled, and
// the access log says 499, as NGINX (proxy_ignore_client_abort off).
//
// A read cannot tell a client that closed its connection from one that
// only shut down its writing side (a half-close): both are the end of the
// stream (FIN). So a half-close while a request waits is a client gone,
// as in net/http and NGINX; it is what a client that closes while it
// waits sends first, and the only way to cancel for one is to cancel for
// both. A client that half-closes must therefore have its answers before
// it does (an answer that never parked, such as an L1 hit, is written
// before the background read runs, and is sent).
//
// What the watch costs, and why it stays. A handler that never parks (an
// L1 hit) answers before the background read's goroutine first runs, at
// abortPendingRead, with the read deadline already past: no system call.
// One that parks (a batched miss waiting for its bulk call) lets it run
// first: one read(2) that finds nothing (EAGAIN), a wait in the poller,
// and a wake by abortPendingRead's deadline: 1.2–2.0 µs more per request
// under the background read's frames (bench/miss-vs-hit.sh, PERF_RECORD,
// four runs, issue 23), and one more read call (perf trace: 1.9 per hit,
// 2.9 per batched miss, the extra one an EAGAIN). That read cannot be
// skipped for a wait alone: each read through net's poller first clears
// the readiness the poller already delivered (internal/poll prepareRead),
// so only a read tells whether the client sent anything since, and a
// client's end of stream queued behind its request (the half-close above)
// is seen by nothing else.
//
// What such a client is sent: nothing more. net/http would write, for a
// handler that returned without an answer because its context ended, an
// implicit 200 with an empty body, which a half-closed client still reads
// (and a cache in front stores) as the resource's answer. So when a read
// of the connection met the client's end of stream or a failure (Conn's
// gone) and the request's context ended while its handler ran, Wire's
// handler panics with http.ErrAbortHandler: net/http then closes the
// connection without the implicit answer, and logs nothing. A read that
// ran out of time (read_timeout on a body that trickles) also ends the
// context, but the client is there: it is told so, 408, by the handler
// (bodytimeout.go), and that answer is sent.

// timeout reports whether err, a read's, is a deadline's. Asserted, not
// errors.As'd: net/http's background read ends in one on every request
// (abortPendingRead), and errors.As's target would be allocated each time.
// A read's errors are *net.OpError or io.EOF (internal/rawio).
func timeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
