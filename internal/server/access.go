package server

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/accesslog"
	"github.com/sidecache/sidecache/internal/tracing"
)

// cacheName is this cache's member name in Cache-Status (RFC 9211 §2).
const cacheName = "sidecache"

// accessLog wraps the proxy handler and, while on reports true (log.access,
// reloadable), logs one line per request: the equivalent of NGINX's access
// log with $upstream_cache_status. Off, it costs the call to on.
func accessLog(next http.Handler, on func() bool, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !on() {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		ctx, rec := accesslog.WithRecord(r.Context())
		rw := &recorder{ResponseWriter: w}
		next.ServeHTTP(rw, r.WithContext(ctx))
		status := rw.status
		if status == 0 {
			status = http.StatusOK // the handler wrote nothing: net/http sends 200
		}
		result, detail := cacheStatus(w.Header().Values("Cache-Status"))
		log.LogAttrs(ctx, slog.LevelInfo, "access",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("route", rec.Route),
			slog.Int("status", status),
			slog.String("cache", result),
			slog.String("cache_detail", detail),
			slog.Duration("duration", time.Since(start)),
			slog.Duration("upstream", rec.Upstream),
			slog.Int64("bytes", rw.bytes),
			slog.String("request_id", r.Header.Get("X-Request-Id")),
			slog.String("upstream_request_id", rec.UpstreamRequestID),
			tracing.LogAttr(ctx),
		)
	})
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
