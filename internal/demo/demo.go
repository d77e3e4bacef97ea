// Package demo is a stand-in for a DB-backed HTTP service, the kind of
// upstream sidecache sits in front of. It saturates the way a real one does:
// every request holds one of a fixed number of "DB connections" for as long
// as its query takes, so throughput tops out at Slots/QueryTime and latency
// grows with the queue beyond that. It counts calls per endpoint so a test or
// a benchmark can see how many requests a cache saved.
//
// Endpoints (JSON throughout):
//
//	GET    /clients/{id}, /users/{id}   one row; ETag, Last-Modified, 304 on If-None-Match
//	GET    /users?ids=1,2,3             bulk: like SELECT … WHERE id IN (…) ORDER BY id
//	GET    /clients, /users             the first 20 rows
//	PATCH  /clients/{id}, /users/{id}   {"name": "…"} renames; bumps version
//	DELETE /clients/{id}, /users/{id}   marks deleted; 204, then 404
//	GET    /self                        a fixed small object
//	GET    /_demo/counts                calls per endpoint (takes no slot)
//	POST   /_demo/reset                 zero the counts, restore every row (takes no slot)
//
// With Options.Framework the same endpoints answer as Express 5 with
// compression() in front of PostgreSQL would by default (see framework).
//
// Request headers for failure tests: X-Demo-Delay: 50ms adds that much to
// the query (holding the slot, as a slow query would); X-Demo-Fail: 503
// runs the query, then answers that status.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options sizes the stand-in service. Zero values select the defaults; a
// negative QueryTime or PerRowTime means no time at all.
type Options struct {
	// Slots is the number of concurrent "DB connections" (default 10).
	Slots int
	// QueryTime is how long each query holds its slot (default 5ms).
	QueryTime time.Duration
	// PerRowTime is added per ID of a bulk query and per row of a list
	// (default 50µs), so one IN (…) of 100 IDs costs 5ms+5ms, not 100×5ms.
	PerRowTime time.Duration
	// Clients and Users are the row counts; IDs run 1..N (default 10000).
	Clients, Users int
	// Framework answers as a common web framework's defaults would
	// (framework.go): Vary: Accept-Encoding and gzip above 1 KiB, weak
	// ETags, case-insensitive routes with an optional trailing slash,
	// leniently parsed integer IDs, 500 for one that is not an int4.
	Framework bool
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		switch {
		case *d == 0:
			*d = v
		case *d < 0:
			*d = 0
		}
	}
	if o.Slots <= 0 {
		o.Slots = 10
	}
	def(&o.QueryTime, 5*time.Millisecond)
	def(&o.PerRowTime, 50*time.Microsecond)
	if o.Clients <= 0 {
		o.Clients = 10000
	}
	if o.Users <= 0 {
		o.Users = 10000
	}
	return o
}

// listSize is how many rows GET /clients and GET /users return.
const listSize = 20

// maxBulkIDs bounds one bulk query, as a database bounds its parameters.
const maxBulkIDs = 1000

// Server is the demo service; it is an http.Handler.
type Server struct {
	opts   Options
	mux    *http.ServeMux
	slots  chan struct{}
	tables map[string]table
	counts map[string]*atomic.Int64 // fixed at New; values atomic
	front  http.Handler             // mux, or mux in framework's clothes

	mu   sync.Mutex
	rows map[rowKey]row // rows changed since start or reset
}

// New returns a Server with every row pristine and every count zero.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		opts:   opts,
		mux:    http.NewServeMux(),
		slots:  make(chan struct{}, opts.Slots),
		tables: tables(opts.Clients, opts.Users),
		counts: make(map[string]*atomic.Int64),
		rows:   make(map[rowKey]row),
	}
	s.front = s.mux
	if opts.Framework {
		s.front = framework{s.mux}
	}
	for _, name := range []string{"clients", "users"} {
		t := s.tables[name]
		s.handle("GET /"+name+"/{id}", s.getOne(t))
		s.handle("PATCH /"+name+"/{id}", s.patch(t))
		s.handle("DELETE /"+name+"/{id}", s.delete(t))
		s.handle("GET /"+name, s.list(t))
	}
	s.handle("GET /self", endpoint{run: s.self})
	s.mux.HandleFunc("GET /_demo/counts", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Counts())
	})
	s.mux.HandleFunc("POST /_demo/reset", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.front.ServeHTTP(w, r) }

// Counts returns the calls per endpoint since start or the last Reset,
// keyed by route pattern ("GET /clients/{id}"), every endpoint present.
// A 304, a 404 and an injected failure each count as a call.
func (s *Server) Counts() map[string]int64 {
	m := make(map[string]int64, len(s.counts))
	for k, c := range s.counts {
		m[k] = c.Load()
	}
	return m
}

// Reset zeroes the counts and restores every row to its pristine state.
func (s *Server) Reset() {
	s.mu.Lock()
	s.rows = make(map[rowKey]row)
	s.mu.Unlock()
	for _, c := range s.counts {
		c.Store(0)
	}
}

// query is one endpoint's work once it holds a slot: it returns the status
// and body to send (body nil for none) and the headers to set.
type query func(r *http.Request, h http.Header) (status int, body any)

// queryCost tells how long a request's query takes before it runs, from
// the request alone (the bulk size, the list size).
type queryCost func(r *http.Request) time.Duration

type endpoint struct {
	cost queryCost // nil: QueryTime
	run  query
}

func (s *Server) handle(pattern string, e endpoint) {
	c := new(atomic.Int64)
	s.counts[pattern] = c
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c.Add(1)
		s.serve(w, r, e)
	})
}

// serve takes a slot, holds it for the query's time, runs the query and
// writes its answer. A client that goes away while waiting for a slot or
// during the query gives its slot back at once.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, e endpoint) {
	delay, fail, err := demoHeaders(r.Header)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	cost := s.opts.QueryTime
	if e.cost != nil {
		cost = e.cost(r)
	}
	ctx := r.Context()
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	status, body := func() (int, any) {
		defer func() { <-s.slots }()
		if !sleep(ctx, cost+delay) {
			return 0, nil
		}
		if fail != 0 {
			return fail, errorBody{Error: "injected failure", Status: fail}
		}
		return e.run(r, w.Header())
	}()
	switch {
	case status == 0: // client gone
	case body == nil:
		w.WriteHeader(status)
	case status == http.StatusOK && isRaw(body):
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body.(raw))))
		w.WriteHeader(status)
		w.Write(body.(raw))
	default:
		writeJSON(w, status, body)
	}
}

// raw is a body already encoded as JSON.
type raw []byte

func isRaw(b any) bool { _, ok := b.(raw); return ok }

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// demoHeaders reads the failure-injection headers.
func demoHeaders(h http.Header) (delay time.Duration, fail int, err error) {
	if v := h.Get("X-Demo-Delay"); v != "" {
		if delay, err = time.ParseDuration(v); err != nil || delay < 0 {
			return 0, 0, fmt.Errorf("bad X-Demo-Delay %q", v)
		}
	}
	if v := h.Get("X-Demo-Fail"); v != "" {
		if fail, err = strconv.Atoi(v); err != nil || fail < 200 || fail > 599 {
			return 0, 0, fmt.Errorf("bad X-Demo-Fail %q: want a status 200..599", v)
		}
	}
	return delay, fail, nil
}

type errorBody struct {
	Error  string `json:"error"`
	ID     int    `json:"id,omitempty"`
	Status int    `json:"status,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "demo: encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// current returns row id of t and whether it exists (in range, not deleted).
// The caller holds s.mu.
func (s *Server) current(t table, id int) (row, bool) {
	if id < 1 || id > t.size {
		return row{}, false
	}
	r, ok := s.rows[rowKey{t.name, id}]
	if !ok {
		return t.pristine(id), true
	}
	return r, !r.deleted
}

func pathID(r *http.Request) (int, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		return 0, fmt.Errorf("bad id %q", r.PathValue("id"))
	}
	return id, nil
}

func notFound(id int) (int, any) {
	return http.StatusNotFound, errorBody{Error: "not found", ID: id}
}

// getOne serves one row with its validators. If-None-Match is evaluated
// first and, when present, If-Modified-Since is ignored (RFC 9110 §13.2.2).
func (s *Server) getOne(t table) endpoint {
	return endpoint{run: func(r *http.Request, h http.Header) (int, any) {
		id, err := pathID(r)
		if err != nil {
			return http.StatusBadRequest, errorBody{Error: err.Error()}
		}
		s.mu.Lock()
		cur, ok := s.current(t, id)
		s.mu.Unlock()
		if !ok {
			return notFound(id)
		}
		body, etag := t.encode(id, cur)
		h.Set("ETag", etag)
		h.Set("Last-Modified", cur.modified.Format(http.TimeFormat))
		if notModified(r.Header, etag, cur.modified) {
			return http.StatusNotModified, nil
		}
		return http.StatusOK, raw(body)
	}}
}

// notModified evaluates If-None-Match with the weak comparison
// (RFC 9110 §13.1.2), else If-Modified-Since (§13.1.3).
func notModified(h http.Header, etag string, modified time.Time) bool {
	if inm := h.Values("If-None-Match"); len(inm) > 0 {
		for _, v := range inm {
			for _, tag := range strings.Split(v, ",") {
				tag = strings.TrimSpace(tag)
				if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
					return true
				}
			}
		}
		return false
	}
	if ims, err := http.ParseTime(h.Get("If-Modified-Since")); err == nil {
		return !modified.Truncate(time.Second).After(ims)
	}
	return false
}

func (s *Server) patch(t table) endpoint {
	return endpoint{run: func(r *http.Request, h http.Header) (int, any) {
		id, err := pathID(r)
		if err != nil {
			return http.StatusBadRequest, errorBody{Error: err.Error()}
		}
		var in struct {
			Name *string `json:"name"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
			return http.StatusBadRequest, errorBody{Error: "bad JSON body: " + err.Error()}
		}
		s.mu.Lock()
		cur, ok := s.current(t, id)
		if ok {
			cur.version++
			if in.Name != nil {
				cur.name = *in.Name
			}
			// Last-Modified has one-second resolution: keep it rising
			// with every write so If-Modified-Since stays truthful.
			now := time.Now().UTC().Truncate(time.Second)
			if !now.After(cur.modified) {
				now = cur.modified.Add(time.Second)
			}
			cur.modified = now
			s.rows[rowKey{t.name, id}] = cur
		}
		s.mu.Unlock()
		if !ok {
			return notFound(id)
		}
		body, etag := t.encode(id, cur)
		h.Set("ETag", etag)
		h.Set("Last-Modified", cur.modified.Format(http.TimeFormat))
		return http.StatusOK, raw(body)
	}}
}

func (s *Server) delete(t table) endpoint {
	return endpoint{run: func(r *http.Request, h http.Header) (int, any) {
		id, err := pathID(r)
		if err != nil {
			return http.StatusBadRequest, errorBody{Error: err.Error()}
		}
		s.mu.Lock()
		cur, ok := s.current(t, id)
		if ok {
			cur.deleted = true
			s.rows[rowKey{t.name, id}] = cur
		}
		s.mu.Unlock()
		if !ok {
			return notFound(id)
		}
		return http.StatusNoContent, nil
	}}
}

// list serves GET /users?ids=… as one IN (…) query, and GET /clients or
// /users without ids as the first listSize rows.
//
// The bulk answer is what SELECT … WHERE id IN (…) ORDER BY id returns:
// every existing row once, in ascending ID order, whatever the order or
// repetition of the request; unknown and deleted IDs are simply absent. A
// caller that wants its own order (sidecache's split) must reassemble by
// the "id" field, as it would against a real database.
func (s *Server) list(t table) endpoint {
	return endpoint{
		cost: func(r *http.Request) time.Duration {
			n := listSize
			if ids, err := bulkIDs(r); err == nil && ids != nil {
				n = len(ids)
			}
			return s.opts.QueryTime + time.Duration(n)*s.opts.PerRowTime
		},
		run: func(r *http.Request, h http.Header) (int, any) {
			ids, err := bulkIDs(r)
			if err != nil {
				return http.StatusBadRequest, errorBody{Error: err.Error()}
			}
			limit := len(ids)
			next := func(i int) (int, bool) {
				if i >= len(ids) {
					return 0, false
				}
				return ids[i], true
			}
			if ids == nil {
				limit = listSize
				next = func(i int) (int, bool) { return i + 1, i < t.size }
			}
			out := []byte{'['}
			s.mu.Lock()
			defer s.mu.Unlock()
			for i, n := 0, 0; n < limit; i++ {
				id, more := next(i)
				if !more {
					break
				}
				if cur, ok := s.current(t, id); ok {
					if n > 0 {
						out = append(out, ',')
					}
					body, _ := t.encode(id, cur)
					out = append(out, body...)
					n++
				}
			}
			return http.StatusOK, raw(append(out, ']'))
		},
	}
}

// bulkIDs parses ids=1,2,3 (repeated ids= parameters are joined) into
// distinct sorted IDs. It returns nil, nil when the request has no ids
// parameter at all, and an empty slice for ids= with no value.
func bulkIDs(r *http.Request) ([]int, error) {
	vals, ok := r.URL.Query()["ids"]
	if !ok {
		return nil, nil
	}
	seen := make(map[int]bool)
	ids := []int{}
	for _, v := range vals {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			id, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("bad id %q in ids", f)
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	if len(ids) > maxBulkIDs {
		return nil, fmt.Errorf("too many ids: %d > %d", len(ids), maxBulkIDs)
	}
	sort.Ints(ids)
	return ids, nil
}

func (s *Server) self(r *http.Request, h http.Header) (int, any) {
	return http.StatusOK, struct {
		Service string `json:"service"`
		Version string `json:"version"`
	}{"demo-upstream", "1"}
}
