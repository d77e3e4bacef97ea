package check

import (
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// crowdTimeout reports whether resp, a crowd round's answer to q read
// whole at end, is the documented answer to an upstream timeout rather
// than collateral: a 504 with the sidecar's own "upstream timeout" body,
// on a miss, that came at least upstream.timeout after the round began.
//
// A crowd round's bulk endpoint is healthy but slow (10-50 ms); on a
// loaded machine (make test under -race at a load average of 16 on two
// cores) one of its calls can still take longer than upstream.timeout,
// and its waiters then get 504, or their batch, queued behind it, fails
// its deadline (max_wait + upstream.timeout) with 504: the answer the
// contract gives for a timeout, whatever made the call slow. Neither can
// come sooner than upstream.timeout after the round began, as every id of
// the round is fresh (no batch holding it opened before); an earlier 504
// is no timeout and stays collateral, as does every 502 (a budget spent
// on other requests' batches, a failure spread to a good id).
func (ch *Checker) crowdTimeout(q *traffic.Request, resp *http.Response, body []byte, end time.Time) bool {
	return q.Crowd && ch.cfg.UpstreamTimeout > 0 &&
		resp.StatusCode == http.StatusGatewayTimeout &&
		string(body) == "upstream timeout\n" &&
		strings.Contains(resp.Header.Get("Cache-Status"), "fwd=miss") &&
		end.Sub(q.Began) >= ch.cfg.UpstreamTimeout
}
