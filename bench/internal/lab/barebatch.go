package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sidecache/sidecache/internal/bulk"
)

// The batching settings of the sidecar's "cache+batch" configuration
// (sidecarYAML), which the bare Go server's batching mode uses too, so
// that the CPU table's batched floor gathers ids as the batch row does.
const (
	batchMaxSize = 100
	batchMaxWait = 2 * time.Millisecond
	// batchMaxInFlight is sidecache's default bound on a group's bulk
	// calls at once (internal/batch DefaultMaxInFlight; the configuration
	// does not set it).
	batchMaxInFlight = 2
)

// BareForgetPath empties the batching mode's store (POST): the bench's
// purge before each round, as the sidecar's L1 is purged.
const BareForgetPath = "/_bare/forget"

// bareBatch is the bare Go server's batching mode: GET /users/{id} served
// from a map, and an id not in it fetched in one bulk call
// (GET /users?ids=…) shared with the other ids asked meanwhile. It is the
// least a Go server must do to serve a batched miss — the floor the CPU
// table's batched miss is read against — so it does only that: net/http
// gives each request its goroutine, which waits on its call's channel
// (one per call, not per id); the window is sidecache's (see join); the
// answer is split by encoding/json's Decoder into json.RawMessage
// elements (each a copy of its bytes, checked as JSON), each stored in
// one map with its ETag made by sidecache's own function (bulk.ETag:
// sidecache sends one, and the hash then costs both the same); then the
// call's waiters are woken and each answers from the map, headers as the
// from-memory mode's plus Cache-Status (the bench counts hits by it).
// No isolation, no per-group bounds, no coalescing across calls, no TTL:
// what sidecache does beyond this is its own cost.
type bareBatch struct {
	client *http.Client
	bulk   string // the bulk call's URL up to the ids: http://upstream/users?ids=
	// lean splits each answer with sidecache's own splitter
	// (bulk.SplitFor over the whole body, each element then copied into
	// its own allocation as sidecache's are) instead of encoding/json:
	// the batched floor with the one part of the work where the standard
	// library is known to be far dearer (BenchmarkBareSplit) done as
	// sidecache does it, so that what remains is Go's own plumbing.
	lean bool

	mu       sync.Mutex
	open     *bareCall   // gathering ids; at most one
	ready    []*bareCall // full, waiting for a slot, oldest first
	inFlight int
	timer    *time.Timer // ends the open call's window (timeUp)

	storeMu sync.RWMutex
	store   map[int64]*bareEntry
}

// bareCall is one bulk call: its ids, and done closed once its answer is
// stored (or err set).
type bareCall struct {
	ids     []int64
	opened  time.Time
	expired bool // its window is up
	done    chan struct{}
	err     error
}

// bareEntry is one stored element, its headers' values made once.
type bareEntry struct {
	body       []byte
	etag, clen []string
}

func newBareBatch(upstream string, lean bool) *bareBatch {
	b := &bareBatch{
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}},
		bulk:   "http://" + upstream + "/users?ids=",
		lean:   lean,
		store:  map[int64]*bareEntry{},
	}
	b.timer = time.AfterFunc(time.Hour, b.timeUp)
	b.timer.Stop()
	return b
}

var (
	bareJSON  = []string{"application/json"}
	bareHit   = []string{"bare; hit"}
	bareMiss  = []string{"bare; fwd=miss"}
	errNoJSON = errors.New("bare batch: the bulk answer is not a JSON array")
)

// routes adds GET /users/{id} and the forget endpoint to mux.
func (b *bareBatch) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /users/{id}", b.serveUser)
	mux.HandleFunc("POST "+BareForgetPath, func(w http.ResponseWriter, r *http.Request) {
		b.storeMu.Lock()
		b.store = map[int64]*bareEntry{}
		b.storeMu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
}

func (b *bareBatch) serveUser(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		http.NotFound(w, r)
		return
	}
	status := bareHit
	e := b.lookup(id)
	if e == nil {
		status = bareMiss
		c := b.join(id)
		<-c.done
		if c.err != nil {
			http.Error(w, c.err.Error(), http.StatusBadGateway)
			return
		}
		if e = b.lookup(id); e == nil {
			http.NotFound(w, r)
			return
		}
	}
	h := w.Header()
	h["Content-Type"], h["Content-Length"], h["Etag"], h["Cache-Status"] = bareJSON, e.clen, e.etag, status
	w.Write(e.body)
}

func (b *bareBatch) lookup(id int64) *bareEntry {
	b.storeMu.RLock()
	defer b.storeMu.RUnlock()
	return b.store[id]
}

// join adds id to the open call (opening one if none) and returns that
// call. The window is sidecache's adaptive one (internal/batch): a call
// goes when it holds batchMaxSize ids, or once batchMaxWait has passed
// since it opened and no call is in flight; while one is, ids keep
// gathering for the next, so a busy server makes fewer, fuller calls.
func (b *bareBatch) join(id int64) *bareCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.open
	if c == nil {
		c = &bareCall{opened: time.Now(), done: make(chan struct{})}
		b.open = c
		b.timer.Reset(batchMaxWait)
	}
	c.ids = append(c.ids, id)
	if len(c.ids) >= batchMaxSize {
		b.open = nil
		b.timer.Stop()
		b.ready = append(b.ready, c)
	}
	b.pumpLocked()
	return c
}

// timeUp marks the open call's window up, if it is (a late run of the
// timer set for an earlier call finds a younger one and leaves it).
func (b *bareBatch) timeUp() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.open; c != nil && time.Since(c.opened) >= batchMaxWait {
		c.expired = true
		b.pumpLocked()
	}
}

// pumpLocked starts calls while a slot is free: the full ones first, then
// the open one if its window is up and nothing is in flight.
func (b *bareBatch) pumpLocked() {
	for b.inFlight < batchMaxInFlight {
		if len(b.ready) == 0 {
			if c := b.open; c == nil || !(c.expired && b.inFlight == 0) {
				return
			}
			b.ready, b.open = append(b.ready, b.open), nil
		}
		c := b.ready[0]
		b.ready = b.ready[1:]
		b.inFlight++
		go b.fetch(c)
	}
}

// fetch makes c's bulk call, stores its elements, wakes its waiters and
// lets the next call go.
func (b *bareBatch) fetch(c *bareCall) {
	c.err = b.call(c.ids)
	close(c.done)
	b.mu.Lock()
	b.inFlight--
	b.pumpLocked()
	b.mu.Unlock()
}

func (b *bareBatch) call(ids []int64) error {
	u := make([]byte, 0, len(b.bulk)+8*len(ids))
	u = append(u, b.bulk...)
	for i, id := range ids {
		if i > 0 {
			u = append(u, ',')
		}
		u = strconv.AppendInt(u, id, 10)
	}
	resp, err := b.client.Get(string(u))
	if err != nil {
		return fmt.Errorf("bare batch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("bare batch: bulk call: status %d", resp.StatusCode)
	}
	split := splitBulk
	if b.lean {
		split = func(r io.Reader, _ int) (map[int64]*bareEntry, error) { return splitLean(r, resp.ContentLength, ids) }
	}
	entries, err := split(resp.Body, len(ids))
	if err != nil {
		return err
	}
	b.storeMu.Lock()
	for id, e := range entries {
		b.store[id] = e
	}
	b.storeMu.Unlock()
	return nil
}

// splitBulk reads a JSON array of objects, each with a numeric "id", into
// entries by id.
func splitBulk(r io.Reader, n int) (map[int64]*bareEntry, error) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil, errNoJSON
	}
	out := make(map[int64]*bareEntry, n)
	for dec.More() {
		var elem json.RawMessage // Decode copies the element's bytes into it
		if err := dec.Decode(&elem); err != nil {
			return nil, fmt.Errorf("bare batch: bulk answer: %w", err)
		}
		id, err := elementID(elem)
		if err != nil {
			return nil, err
		}
		out[id] = &bareEntry{body: elem, etag: []string{bulk.ETag(elem)}, clen: []string{strconv.Itoa(len(elem))}}
	}
	return out, nil
}

// splitLean reads the whole answer (size bytes when known) and splits it
// with sidecache's splitter for the asked ids, each element copied into
// its own allocation with its ETag.
func splitLean(r io.Reader, size int64, ids []int64) (map[int64]*bareEntry, error) {
	var body []byte
	var err error
	if size >= 0 {
		body = make([]byte, size)
		_, err = io.ReadFull(r, body)
	} else {
		body, err = io.ReadAll(r)
	}
	if err != nil {
		return nil, fmt.Errorf("bare batch: bulk answer: %w", err)
	}
	asked := make([]string, len(ids))
	for i, id := range ids {
		asked[i] = strconv.FormatInt(id, 10)
	}
	elems, err := bulk.SplitFor(body, "id", asked)
	if err != nil {
		return nil, fmt.Errorf("bare batch: bulk answer: %w", err)
	}
	out := make(map[int64]*bareEntry, len(ids))
	for i, e := range elems {
		if e != nil {
			out[ids[i]] = &bareEntry{body: e, etag: []string{bulk.ETag(e)}, clen: []string{strconv.Itoa(len(e))}}
		}
	}
	return out, nil
}

var idHead = []byte(`{"id":`)

// elementID is an element's "id": read from the element's head where the
// demo (encoding/json of its record struct) writes it, else by decoding
// the element.
func elementID(elem []byte) (int64, error) {
	if rest, ok := bytes.CutPrefix(elem, idHead); ok {
		if end := bytes.IndexAny(rest, ",}"); end > 0 {
			if id, err := strconv.ParseInt(string(rest[:end]), 10, 64); err == nil {
				return id, nil
			}
		}
	}
	var v struct {
		ID *int64 `json:"id"`
	}
	if err := json.Unmarshal(elem, &v); err != nil || v.ID == nil {
		return 0, fmt.Errorf("bare batch: an element without a numeric id: %.60s", elem)
	}
	return *v.ID, nil
}
