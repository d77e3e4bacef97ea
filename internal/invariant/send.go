package invariant

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"

	"github.com/sidecache/sidecache/internal/invariant/check"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
	"github.com/sidecache/sidecache/internal/relay"
)

// do sends q and checks its answer.
func (r *run) do(ctx context.Context, q *traffic.Request) {
	var hints atomic.Int64
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		if code != http.StatusContinue {
			hints.Add(1)
		}
		return nil
	}})
	req, err := r.gen.HTTPRequest(ctx, q, r.cfg.Replicas[q.Replica])
	if err != nil {
		r.violate("harness", "%s: %v", q, err)
		return
	}
	for k, vs := range q.Hdr {
		req.Header[k] = vs
	}
	if q.Hangup {
		hctx, cancel := context.WithCancel(req.Context()) // keeps proxyKey
		defer cancel()
		req = req.WithContext(httptrace.WithClientTrace(hctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { cancel() },
		}))
	}
	start := check.Now()
	client := q.Who.Client
	if q.Absolute {
		client = q.Who.Proxied
	}
	resp, err := client.Do(req)
	if q.Hangup {
		if err == nil {
			resp.Body.Close() // answered before the hang-up: not acknowledged either
		}
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			r.violate("transport", "%s: %v", q, err)
		}
		return
	}
	r.chk.Edges(q, resp)
	if n := hints.Load(); n > relay.MaxRelayed {
		r.violate("interim", "%s: %d 1xx relayed, at most %d", q, n, relay.MaxRelayed)
	}
	body, err := check.ReadBody(resp)
	resp.Body.Close()
	end := check.Now()
	if err != nil && r.cfg.Mix.Has("truncate") && errors.Is(err, io.ErrUnexpectedEOF) {
		// A body the origin broke off reaches the client broken (RFC
		// 9112 §8): the right outcome. One that reads whole but short
		// fails its stamp's JSON below.
		return
	}
	if err != nil {
		r.violate("garbled", "%s: reading the answer: %v", q, err)
		return
	}
	r.chk.Trailers(q, resp)
	r.chk.Answer(q, resp, body, start, end)
}
