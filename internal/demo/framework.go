package demo

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
)

// gzipThreshold is compression()'s default threshold: smaller bodies go
// identity-coded.
const gzipThreshold = 1024

// framework wraps the demo in the defaults of a common web framework
// (Express 5 with compression() in front of PostgreSQL), the shape issue
// 24 found sidecache's batching tripping over:
//
//   - routes match case-insensitively and with an optional trailing slash
//     (Express's caseSensitive: false, strict: false);
//   - integer IDs are parsed as PostgreSQL's int4 input does: "05" and
//     "+5" are 5; one that does not parse or overflows fails the query,
//     and the unhandled error is a 500 (a bulk call fails whole);
//   - every answer with a body says Vary: Accept-Encoding, and is
//     gzip-coded above 1 KiB when the request accepts gzip (compression());
//   - ETags are weak, over the identity body (W/"<len>-<sha1>", Express's
//     etag: weak), and If-None-Match is answered 304 by weak comparison
//     (RFC 9110 §8.8.3.2); no Last-Modified.
type framework struct{ next http.Handler }

func (f framework) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	p := strings.ToLower(r.URL.Path)
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	r2.URL.Path, r2.URL.RawPath = p, ""
	inm := r2.Header.Values("If-None-Match")
	r2.Header.Del("If-None-Match")
	r2.Header.Del("If-Modified-Since")
	if r2.Method == http.MethodGet && !intIDs(r2) {
		w.Header().Set("Vary", "Accept-Encoding")
		http.Error(w, `{"error":"invalid input syntax for type integer"}`, http.StatusInternalServerError)
		return
	}
	rec := &buffered{header: http.Header{}}
	f.next.ServeHTTP(rec, r2)
	h := w.Header()
	for k, v := range rec.header {
		h[k] = v
	}
	h.Del("Last-Modified")
	h.Del("Content-Length")
	status, body := rec.code(), rec.body.Bytes()
	if len(body) == 0 && status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	h.Set("Vary", "Accept-Encoding")
	if status == http.StatusOK || status == http.StatusNotModified {
		sum := sha1.Sum(body)
		tag := `W/"` + strconv.FormatInt(int64(len(body)), 16) + "-" + base64.RawStdEncoding.EncodeToString(sum[:20]) + `"`
		h.Set("Etag", tag)
		if weakMatch(inm, tag) {
			h.Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if len(body) >= gzipThreshold && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// intIDs reports whether every ID of a GET (the path's last segment under
// /clients/ or /users/, each of ?ids=) is a PostgreSQL int4.
func intIDs(r *http.Request) bool {
	for _, prefix := range []string{"/clients/", "/users/"} {
		if id, ok := strings.CutPrefix(r.URL.Path, prefix); ok && !int4(id) {
			return false
		}
	}
	for _, v := range r.URL.Query()["ids"] {
		for _, id := range strings.Split(v, ",") {
			if strings.TrimSpace(id) != "" && !int4(id) {
				return false
			}
		}
	}
	return true
}

// int4 is PostgreSQL's int4 input: optional blanks and sign, decimal
// digits, leading zeros allowed, within 32 bits.
func int4(s string) bool {
	_, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	return err == nil
}

// weakMatch is If-None-Match's weak comparison (RFC 9110 §13.1.2).
func weakMatch(inm []string, tag string) bool {
	for _, v := range inm {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(tag, "W/") {
				return true
			}
		}
	}
	return false
}

func acceptsGzip(vals []string) bool {
	for _, v := range vals {
		for _, c := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(c), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
			if f, err := strconv.ParseFloat(q, 64); !ok || err != nil || f > 0 {
				return true
			}
		}
	}
	return false
}

// buffered holds an answer so framework can set its validator and coding.
type buffered struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffered) Header() http.Header         { return b.header }
func (b *buffered) WriteHeader(code int)        { b.status = code }
func (b *buffered) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *buffered) code() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}
