// Package splitlist reassembles a list answer (GET /users?ids=3,1,2) from
// the per-ID answers it was split into, as the app's own list endpoint
// would have sent it (issue 24 item 2): the elements in the requested
// order, unknown ids left out, one Content-Type and Cache-Control for the
// whole, gzip-coded for a client that accepts gzip once the list is worth
// compressing, and a strong ETag per coding. Which ids, and where each
// element comes from, are the caller's.
package splitlist

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sidecache/sidecache/internal/bulk"
	"github.com/sidecache/sidecache/internal/cachekey"
	"github.com/sidecache/sidecache/internal/httpcache"
)

// GzipMin is the smallest list that is compressed: the default threshold
// of Express's compression() (1 KiB), below which gzip's framing costs
// more than it saves.
const GzipMin = 1024

// List gathers a list's elements in order (Add), then gives its answer.
type List struct {
	elems   [][]byte
	ct, cc  string
	private bool
	n       int // elements added
	// vary are the request headers the list's answer depends on (see
	// Make, Add); star: an element said Vary: *.
	vary []string
	star bool
	// cookies are the Set-Cookie and Set-Cookie2 values of the answers
	// added, each once (Add).
	cookies [2][]string
}

// Make is a List with room for n elements, for a target route whose key
// holds the request headers keyed: the elements were chosen by their
// values, so the list varies on them (RFC 9110 §12.5.5), as it does on
// each element's Vary (Add).
func Make(n int, keyed ...string) List {
	l := List{elems: make([][]byte, 0, n)}
	for _, k := range keyed {
		l.vary = append(l.vary, textproto.CanonicalMIMEHeaderKey(k))
	}
	return l
}

// cookieFields are the fields by which an answer sets a cookie.
var cookieFields = [2]string{"Set-Cookie", "Set-Cookie2"}

// Add appends the answer for the next id: its status, stored header and
// body. Only a 200 is an element; any other (a 404 of an unknown id) is
// left out, as an upstream answering with a SQL `IN (…)` would.
//
// A cookie an answer sets, an element or not, is the list's: such an
// answer is private to the request whose headers its call carried
// (internal/bulkanswer), which only this list's own calls did, so the
// list relays it as the app's list endpoint, called by this client,
// would have set it; the same cookie set by several of its calls once.
//
// Every answer, an element or not, adds its Vary to the list's: which ids
// the list holds depends on the headers that chose each answer too.
func (l *List) Add(status int, h http.Header, body []byte) {
	names, star := cachekey.ParseVary(h)
	l.vary, l.star = append(l.vary, names...), l.star || star
	for i, k := range cookieFields {
		for _, v := range h[k] {
			if !slices.Contains(l.cookies[i], v) {
				l.cookies[i] = append(l.cookies[i], v)
			}
		}
	}
	if status != http.StatusOK {
		return
	}
	if l.ct == "" {
		l.ct = h.Get("Content-Type")
	}
	l.private = l.private || httpcache.Private(h)
	// Every line of the field: Get's first alone took max-age=60 then
	// no-cache for max-age=60 (RFC 9110 §5.3).
	if c := strings.Join(h.Values("Cache-Control"), ", "); l.n == 0 {
		l.cc = c
	} else if c != l.cc {
		l.cc = ""
	}
	l.n++
	l.elems = append(l.elems, body)
}

// Answer is a reassembled list, ready to send.
type Answer struct {
	Body        []byte // the JSON array, uncompressed
	ContentType string // the first element's; application/json if none
	// CacheControl is the one every element shares, "" if they differ;
	// Private overrides it.
	CacheControl string
	Private      bool // an element is private to its client
	// Vary is the union of the elements' Vary and the keyed headers,
	// sorted; VaryStar: an element said Vary: *. SetHeader adds
	// Accept-Encoding.
	Vary     []string
	VaryStar bool
	// Cookies are the Set-Cookie and Set-Cookie2 values the answers
	// set (Add), relayed as they came.
	Cookies [2][]string
}

// Answer joins the elements added so far.
func (l *List) Answer() Answer {
	ct := l.ct
	if ct == "" {
		ct = "application/json"
	}
	slices.Sort(l.vary)
	l.vary = slices.Compact(l.vary)
	return Answer{Body: bulk.Join(l.elems), ContentType: ct, CacheControl: l.cc, Private: l.private, Vary: l.vary, VaryStar: l.star, Cookies: l.cookies}
}

// SetHeader sets a's representation fields in hd for a client whose
// Accept-Encoding values are accept, and reports whether the body is to
// be sent gzip-coded: Vary names Accept-Encoding either way, with every
// header an element varies on or the key holds (RFC 9110 §12.5.5: a list
// that said Accept-Encoding alone told a shared cache in front that one
// language's list answers every language), and a strong ETag per coding over the bytes sent (RFC 9110
// §8.8.3: a strong tag names one representation), so the caller can
// answer a matching If-None-Match with a 304 (RFC 9110 §13.1.2); and the
// cookies its answers set (Add).
func (a Answer) SetHeader(hd http.Header, accept []string) (gz bool) {
	hd.Set("Content-Type", a.ContentType)
	if a.VaryStar {
		hd.Set("Vary", "*")
	} else {
		vary := append(slices.Clone(a.Vary), "Accept-Encoding")
		slices.Sort(vary)
		hd.Set("Vary", strings.Join(slices.Compact(vary), ", "))
	}
	for i, k := range cookieFields {
		if len(a.Cookies[i]) > 0 {
			hd[k] = a.Cookies[i]
		}
	}
	switch {
	case a.Private:
		hd.Set("Cache-Control", "private")
	case a.CacheControl != "":
		hd.Set("Cache-Control", a.CacheControl)
	}
	gz = len(a.Body) >= GzipMin && cachekey.VariantCoding(accept, cachekey.Codings(0).With("gzip")) == "gzip"
	tag := bulk.ETag(a.Body)
	if gz {
		tag = tag[:len(tag)-1] + `-gzip"`
	}
	hd.Set("Etag", tag)
	return gz
}

// Write answers r with a: its header as SetHeader sets it, the
// Cache-Status field cacheStatus, and a 304 when the client's
// If-None-Match holds its ETag (RFC 9110 §13.1.2); the body gzip-coded
// with gz when the client takes it.
func (a Answer) Write(w http.ResponseWriter, r *http.Request, cacheStatus string, gz *Gzip) {
	hd := w.Header()
	coded := a.SetHeader(hd, r.Header["Accept-Encoding"])
	hd.Set("Cache-Status", cacheStatus)
	if httpcache.NotModified(r, hd) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.Body
	if coded {
		body = gz.Compress(body)
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// Gzip compresses lists at gzip's fastest level with pooled writers (a
// flate writer allocates its window once). The zero value is ready.
type Gzip struct{ writers sync.Pool }

// Compress returns body gzip-coded.
func (g *Gzip) Compress(body []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(body) / 3)
	zw, _ := g.writers.Get().(*gzip.Writer)
	if zw == nil {
		zw, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	} else {
		zw.Reset(&buf)
	}
	_, _ = zw.Write(body)
	_ = zw.Close()
	g.writers.Put(zw)
	return buf.Bytes()
}
