package origin

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
)

// How the origin reads a request's fields (dimensions, Accept-Encoding,
// If-None-Match) and writes its answers' bytes: the harness's checks and
// draws read the same fields the same way through the exported ones.

// MatchWeak reports whether If-None-Match field lines hold "*" or a tag
// equal to etag by the weak comparison (RFC 9110 §13.1.2, §8.8.3.2).
func MatchWeak(inm []string, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	for _, line := range inm {
		for _, t := range strings.Split(line, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == want {
				return true
			}
		}
	}
	return false
}

// pickCode is a refusal's status: 405 or 409, fixed per resource.
func pickCode(res string) int {
	if len(res)%2 == 0 {
		return http.StatusMethodNotAllowed
	}
	return http.StatusConflict
}

// dimValue is the value of a dimension in a request as the origin reads
// it: the last X-Forwarded-For element (the sidecar's peer), the sid
// cookie of any Cookie line, the bearer token.
func dimValue(r *http.Request, dim string) string {
	switch dim {
	case "addr":
		xff := strings.Join(r.Header.Values("X-Forwarded-For"), ",")
		if xff == "" {
			host, _, _ := strings.Cut(r.RemoteAddr, ":")
			return host
		}
		parts := strings.Split(xff, ",")
		return strings.TrimSpace(parts[len(parts)-1])
	case "cookie":
		for _, c := range r.Cookies() {
			if c.Name == "sid" {
				return c.Value
			}
		}
		return ""
	case "auth":
		for _, a := range r.Header.Values("Authorization") {
			if v, ok := strings.CutPrefix(a, "Bearer "); ok {
				return v
			}
		}
		return ""
	}
	return JoinLines(r.Header.Values(dimHeader[dim]))
}

// AcceptsGzip reports whether Accept-Encoding values accept gzip: its own
// member (gzip or x-gzip) decides if there is one, else "*"; a q of 0
// refuses (RFC 9110 §12.5.3, §12.4.2: qvalues are case-insensitive).
func AcceptsGzip(vals []string) bool {
	own, star := "", ""
	for _, v := range vals {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			q := strings.ReplaceAll(strings.ToLower(params), " ", "")
			if q == "" {
				q = "q=1"
			}
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "gzip", "x-gzip":
				if own == "" {
					own = q
				}
			case "*":
				if star == "" {
					star = q
				}
			}
		}
	}
	q := own
	if q == "" {
		q = star
	}
	if q == "" {
		return false
	}
	return !(q == "q=0" || strings.HasPrefix(q, "q=0.") && strings.Trim(q[2:], "0.") == "")
}

// encodeStamp pads the stamp to size bytes with letters from a PRNG seeded
// by the stamp itself (one version and variant, one body: an ETag holds);
// gzip takes them to about 60 %, so a body can be over max_body_bytes as
// identity and under it as gzip.
func encodeStamp(st Stamp, size int) []byte {
	b, _ := json.Marshal(st)
	if n := size - len(b) - len(`,"pad":""`); n > 0 {
		r := rand.New(rand.NewPCG(uint64(fnv(b)), 1))
		pad := make([]byte, n)
		for i := range pad {
			pad[i] = 'a' + byte(r.IntN(26))
		}
		st.Pad = string(pad)
		b, _ = json.Marshal(st)
	}
	return b
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func fnv(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// fault answers w with the fault a roll of 0-99 draws at the rates hang
// and fail (percent): a hang-up below hang, else code with msg below
// hang+fail. It reports whether it answered.
func fault(w http.ResponseWriter, roll, hang, fail, code int, msg string) bool {
	switch {
	case roll < hang:
		hangUp(w)
		return true
	case roll < hang+fail:
		http.Error(w, msg, code)
		return true
	}
	return false
}

func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// JoinLines is a field's lines as one list value, as the origin reads
// them (the harness records what it sent the same way): the non-empty ones,
// joined with ", " (RFC 9110 §5.3).
func JoinLines(vs []string) string {
	var out []string
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}
