package server

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/metrics"
	"github.com/sidecache/sidecache/internal/tracing"
)

// cacheName is this cache's member name in Cache-Status (RFC 9211 §2).
const cacheName = "sidecache"

// statusClientClosed is NGINX's 499: the client went away before the
// answer was written, so nothing was sent (no status is in RFC 9110 for it).
const statusClientClosed = 499

// accessLog wraps the proxy handler and, while cfg().Access is on
// (log.access, reloadable), logs one line per request: the equivalent of
// NGINX's access log with $upstream_cache_status, $request_time and
// $upstream_response_time (seconds, as decimals). Off, it costs the call
// to cfg.
func accessLog(next http.Handler, cfg func() config.Log, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc := cfg()
		if !lc.Access {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		ctx, rec := accesslog.WithRecord(r.Context())
		rw := &recorder{ResponseWriter: w}
		next.ServeHTTP(rw, r.WithContext(ctx))
		status := rw.status
		switch {
		case status == 0 && r.Context().Err() != nil:
			status = statusClientClosed // the client left before any answer
		case status == 0:
			status = http.StatusOK // the handler wrote nothing: net/http sends 200
		}
		result, detail := cacheStatus(w.Header().Values("Cache-Status"))
		if rec.Result != "" {
			result = rec.Result // the metrics' label (pass, not bypass)
		}
		route := rec.Route
		if route == "" {
			route = metrics.PassRoute
		}
		log.LogAttrs(ctx, slog.LevelInfo, "access",
			slog.String("method", r.Method),
			slog.String("host", r.Host),
			slog.String("path", r.URL.Path),
			slog.String("query", accesslog.RedactQuery(r.URL.RawQuery, lc.RedactQuery)),
			slog.String("client", clientAddr(r.RemoteAddr)),
			slog.String("user_agent", r.UserAgent()),
			slog.String("request_id", r.Header.Get("X-Request-Id")),
			slog.String("upstream_request_id", rec.UpstreamRequestID),
			slog.String("route", route),
			slog.Int("status", status),
			slog.String("cache", result),
			slog.String("cache_detail", detail),
			slog.Float64("duration", seconds(time.Since(start))),
			slog.Float64("upstream", seconds(rec.Upstream)),
			slog.Int64("bytes", rw.bytes),
			tracing.LogAttr(ctx),
		)
	})
}

// seconds is d in seconds to the microsecond, as NGINX writes
// $request_time (to the millisecond) and a log pipeline reads a number.
func seconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1e6 }

// clientAddr is the peer's address without the port (NGINX's
// $remote_addr); the sidecar's own peer, not X-Forwarded-For, which the
// client may write.
func clientAddr(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// cacheStatus reads this cache's member of a Cache-Status field: the last
// one, since each cache appends its own after those nearer the origin (RFC
// 9211 §2). result is "hit" or the fwd reason (miss, stale, bypass, ...);
// detail joins the stored and collapsed flags and the detail parameter
// (e.g. "l1", "stored", "collapsed"). Both are "" without such a member.
func cacheStatus(values []string) (result, detail string) {
	field := strings.Join(values, ",")
	i := strings.LastIndexByte(field, ',')
	member := strings.TrimSpace(field[i+1:])
	params := strings.Split(member, ";")
	if strings.TrimSpace(params[0]) != cacheName {
		return "", ""
	}
	var details []string
	for _, p := range params[1:] {
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch name {
		case "hit":
			result = "hit"
		case "fwd":
			result = value
		case "stored", "collapsed":
			details = append(details, name)
		case "detail":
			details = append(details, strings.Trim(value, `"`))
		}
	}
	return result, strings.Join(details, ",")
}

// recorder notes the status and the body bytes written. Unwrap lets
// http.ResponseController reach the connection's Flush and deadlines.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
