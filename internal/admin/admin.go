// Package admin serves the admin listener: metrics, health, readiness, the
// compiled routes, purge, and (when enabled) Go profiling.
//
// The listener is reachable by whatever scrapes metrics and probes health,
// which in Kubernetes means the pod network. So only what is read-only and
// harmless is open: /metrics, /healthz, /readyz and /routes. Purge, cache
// inspection and profiling need the bearer token, and profiling is off unless enabled:
// a profile exposes memory contents and costs CPU.
//
// Everything is mounted on a private ServeMux. net/http/pprof registers
// itself on http.DefaultServeMux when imported; that mux is never served,
// so profiles are reachable only here, on the admin address.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Readiness reports whether the process should receive traffic. detail
// names the state of each part, e.g. {"l2": "degraded", "config": "loaded"};
// it is copied into the /readyz body next to "ready".
type Readiness interface {
	Ready() (ok bool, detail map[string]string)
}

// Purger drops cached entries in L1 (on every replica) and L2. The int
// results count what was dropped, as the store knows it.
type Purger interface {
	PurgeTag(ctx context.Context, tag string) (int, error)
	PurgeKey(ctx context.Context, key string) (int, error)
	PurgeRoute(ctx context.Context, route string) (int, error)
	// PurgeURL drops every entry of the URL's path: all its hosts, queries
	// and variants (lenient, as invalidation is).
	PurgeURL(ctx context.Context, target *url.URL) (int, error)
	PurgeAll(ctx context.Context) (AllPurged, error)
}

// AllPurged is what a purge of everything did, for its answer. An error
// from PurgeAll means the purge did not take (a 500); a purge that took
// but whose sweep of L2's keys stopped short is Complete false, with
// Error saying why and what was done.
type AllPurged struct {
	All      bool   `json:"all"`
	Unlinked int    `json:"unlinked"`
	Retried  int    `json:"retried"`
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

// Inspector backs GET /cache: what the cache holds for one URL, as a
// JSON-encodable value (docs/admin-api.md). h carries the request headers
// the operator gives (key.headers, or the ones a Vary picks a variant by).
// An error wrapping ErrNotFound is a 404 (no route takes the URL).
type Inspector interface {
	Inspect(ctx context.Context, target *url.URL, h http.Header) (any, error)
}

// ErrNotFound, wrapped by a Purger or Inspector, says the selector names
// nothing that exists (an unknown route): the caller gets 404, not a 500
// that the docs say to retry.
var ErrNotFound = errors.New("not found")

// Options configures Handler. Every field may be left zero.
type Options struct {
	// Token is the bearer token mutating calls must present; "" refuses
	// them all, so an unset token never means "open".
	Token string
	// TokenFunc, when set, is read on every call instead of Token, so a
	// config reload can change the token without a restart.
	TokenFunc func() string
	// Gatherer is served on /metrics; nil serves an empty exposition.
	Gatherer prometheus.Gatherer
	// Ready backs /readyz; nil is always ready.
	Ready Readiness
	// Purger backs POST /purge; nil answers 501.
	Purger Purger
	// Inspector backs GET /cache; nil answers 501.
	Inspector Inspector
	// Routes returns the value encoded as JSON on GET /routes; nil gives [].
	Routes func() any
	// Logger receives errors that are not shown to clients; nil discards.
	Logger *slog.Logger
	// PProf serves /debug/pprof/, behind Token like purge; false answers
	// 404 there.
	PProf bool
}

// Handler returns the admin listener's handler. Wrong methods get 405 with
// Allow (ServeMux method patterns); unknown paths 404.
func Handler(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.NewRegistry()
	}
	if opts.TokenFunc == nil {
		token := opts.Token
		opts.TokenFunc = func() string { return token }
	}
	h := &handler{opts: opts}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      promLogger{opts.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	mux.HandleFunc("GET /routes", h.routes)
	mux.HandleFunc("POST /purge", h.purge)
	mux.HandleFunc("GET /cache", h.inspect)

	if opts.PProf {
		mux.Handle("/debug/pprof/", h.withToken(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", h.withToken(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", h.withToken(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", h.withToken(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", h.withToken(http.HandlerFunc(pprof.Trace)))
	}
	return noStore(mux)
}

// noStore marks every answer, the mux's own 404 and 405 included, as not
// to be stored by any cache between the operator and this listener (RFC
// 9111 §5.2.2.5): they describe the state of one moment.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// withToken serves next only to a caller with the admin token.
func (h *handler) withToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.refuse(w, r, "profiling") {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers for a caller without the admin token and reports whether
// it did: 403 when no token is configured (an unset token never means
// "open"), 401 with a challenge otherwise.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, what string) bool {
	if h.opts.TokenFunc() == "" {
		h.writeError(w, http.StatusForbidden, what+" disabled: admin.token is not set")
		return true
	}
	if code := h.authorize(r); code != "" {
		// Logged as NGINX's auth_basic logs a mismatch: a token being
		// guessed, or a rotated one a script still sends, shows (this
		// listener has no access log). Never what was presented. The
		// server's process log bounds the line's rate (internal/lograte).
		h.opts.Logger.WarnContext(r.Context(), "admin: unauthorized",
			"peer", peerHost(r.RemoteAddr), "method", r.Method, "path", r.URL.Path, "why", code)
		// RFC 6750 §3: challenge, with error="invalid_token" when a token
		// was presented but is wrong.
		challenge := `Bearer realm="sidecache"`
		if code != "missing" {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		h.writeError(w, http.StatusUnauthorized, "unauthorized")
		return true
	}
	return false
}

type handler struct {
	opts Options
}

func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	ok, detail := true, map[string]string(nil)
	if h.opts.Ready != nil {
		ok, detail = h.opts.Ready.Ready()
	}
	body := make(map[string]any, len(detail)+1)
	for k, v := range detail {
		body[k] = v
	}
	body["ready"] = ok
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	h.writeJSON(w, code, body)
}

func (h *handler) routes(w http.ResponseWriter, r *http.Request) {
	var v any = []any{}
	if h.opts.Routes != nil {
		v = h.opts.Routes()
	}
	h.writeJSON(w, http.StatusOK, v)
}

// inspect answers GET /cache?url=U[&header=Name:%20value...]: what the
// cache holds for U, in which tier, how old, for how long, under which tags
// and variants. Behind the token: keys and tags name what clients asked for.
func (h *handler) inspect(w http.ResponseWriter, r *http.Request) {
	if h.refuse(w, r, "inspect") {
		return
	}
	if h.opts.Inspector == nil {
		h.writeError(w, http.StatusNotImplemented, "inspect is not available")
		return
	}
	q := r.URL.Query()
	raw := q.Get("url")
	u, err := url.Parse(raw)
	if raw == "" || err != nil || !u.IsAbs() || u.Host == "" {
		h.writeError(w, http.StatusBadRequest, "url must be absolute, with the host clients use: http://host/path?query")
		return
	}
	hdr := http.Header{}
	for _, kv := range q["header"] {
		name, value, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(name) == "" {
			h.writeError(w, http.StatusBadRequest, "header must be Name: value")
			return
		}
		hdr.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	v, err := h.opts.Inspector.Inspect(r.Context(), u, hdr)
	if errors.Is(err, ErrNotFound) {
		h.writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		h.opts.Logger.ErrorContext(r.Context(), "admin: inspect failed", "url", raw, "err", err)
		h.writeError(w, http.StatusInternalServerError, "inspect failed")
		return
	}
	h.writeJSON(w, http.StatusOK, v)
}

// purge answers POST /purge?tag=T | key=K | route=R | url=U | all=1. The order of
// checks is deliberate: a caller without the token learns nothing about
// selectors or whether purging is wired up.
func (h *handler) purge(w http.ResponseWriter, r *http.Request) {
	if h.refuse(w, r, "purge") {
		return
	}
	if h.opts.Purger == nil {
		h.writeError(w, http.StatusNotImplemented, "purge is not available")
		return
	}
	sel, val, msg := selector(r)
	if msg != "" {
		h.writeError(w, http.StatusBadRequest, msg)
		return
	}

	ctx := r.Context()
	var (
		n   int
		all AllPurged
		err error
	)
	switch sel {
	case "tag":
		n, err = h.opts.Purger.PurgeTag(ctx, val)
	case "key":
		n, err = h.opts.Purger.PurgeKey(ctx, val)
	case "route":
		n, err = h.opts.Purger.PurgeRoute(ctx, val)
	case "url":
		var u *url.URL
		if u, err = url.Parse(val); err != nil || u.Path == "" {
			h.writeError(w, http.StatusBadRequest, "url must be a URL with a path")
			return
		}
		n, err = h.opts.Purger.PurgeURL(ctx, u)
	case "all":
		all, err = h.opts.Purger.PurgeAll(ctx)
	}
	if errors.Is(err, ErrNotFound) {
		h.writeError(w, http.StatusNotFound, fmt.Sprintf("no %s named %q", sel, val))
		return
	}
	if err != nil {
		h.opts.Logger.ErrorContext(ctx, "admin: purge failed", "selector", sel, "value", val, "err", err)
		h.writeError(w, http.StatusInternalServerError, "purge failed")
		return
	}
	h.opts.Logger.InfoContext(ctx, "admin: purge", "selector", sel, "value", val, "purged", n)
	if sel == "all" {
		// What the sweep removed, and whether it went over every key:
		// the purge holds either way (docs/admin-api.md).
		all.All = true
		h.writeJSON(w, http.StatusOK, all)
		return
	}
	h.writeJSON(w, http.StatusOK, map[string]int{"purged": n})
}

// authorize returns "" when r carries the configured bearer token,
// "missing" when it carries none, "invalid" otherwise. The scheme is
// case-insensitive (RFC 9110 §11.1); the comparison of fixed-size digests
// is constant-time, so neither content nor length of the token leaks.
func (h *handler) authorize(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "missing"
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "invalid"
	}
	configured := h.opts.TokenFunc()
	if configured == "" { // read again: a reload may have just cleared it
		return "invalid"
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	want := sha256.Sum256([]byte(configured))
	if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
		return "invalid"
	}
	return ""
}

// selector finds the single purge selector in the query, or explains why
// there is not exactly one.
func selector(r *http.Request) (name, value, problem string) {
	q := r.URL.Query()
	var found []string
	for _, s := range [...]string{"tag", "key", "route", "url", "all"} {
		if _, ok := q[s]; ok {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return "", "", "exactly one of tag, key, route, url or all=1 is required"
	}
	name = found[0]
	vals := q[name]
	if len(vals) != 1 || vals[0] == "" {
		return "", "", name + " needs exactly one non-empty value"
	}
	if name == "all" {
		if b, err := strconv.ParseBool(vals[0]); err != nil || !b {
			return "", "", "all must be 1"
		}
	}
	return name, vals[0], ""
}

func (h *handler) writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		h.opts.Logger.Error("admin: encode json", "err", err)
		h.writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers with a short fixed message; details go to the log.
func (h *handler) writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, code)
}

// peerHost is the caller's address without its port.
func peerHost(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// promLogger adapts slog to promhttp's Println-style error log.
type promLogger struct{ l *slog.Logger }

func (p promLogger) Println(v ...any) {
	p.l.Error("admin: metrics", "err", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}
