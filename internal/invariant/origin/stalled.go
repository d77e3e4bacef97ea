package origin

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The stalled-length row's resources: /stalled/<n>-<sent>, on no route of
// the replicas (pass-through: a GET by the lean loop, a PATCH by
// ReverseProxy). Each call is answered 200 with a Content-Length of
// StalledLength, of which it sends the header and <sent> bytes at once;
// then nothing more until the runner, once its client has read the status
// line and those bytes, releases it (ReleaseStalled), or the sidecar cuts
// its call, or a minute has passed; then it closes the connection short of
// its Content-Length (a broken answer).

// StalledLength is the Content-Length the row's answers announce.
const StalledLength = 4096

const stalledPrefix = "/stalled/"

// StalledPath is the row's n-th resource, whose answers send sent bytes
// of their body before they stall.
func StalledPath(n, sent int) string {
	return stalledPrefix + strconv.Itoa(n) + "-" + strconv.Itoa(sent)
}

// stalledCall is one of the row's answers being held.
type stalledCall struct {
	release chan struct{}
	cut     bool // the sidecar ended the call before the runner released it
}

// stall answers a call to one of the row's resources; it reports whether
// r was one.
func (o *Origin) stall(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, stalledPrefix)
	if !ok {
		return false
	}
	_, s, _ := strings.Cut(rest, "-")
	sent, err := strconv.Atoi(s)
	if err != nil || sent < 0 || sent >= StalledLength {
		http.Error(w, "no such resource", http.StatusNotFound)
		return true
	}
	c := &stalledCall{release: make(chan struct{})}
	o.mu.Lock()
	if o.stalled == nil {
		o.stalled = map[string]*stalledCall{}
	}
	o.stalled[r.URL.Path] = c
	o.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(StalledLength))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(bytes.Repeat([]byte("s"), sent))
	_ = http.NewResponseController(w).Flush()
	select {
	case <-c.release:
	case <-r.Context().Done():
		o.mu.Lock()
		c.cut = true
		o.mu.Unlock()
	case <-time.After(time.Minute):
	}
	panic(http.ErrAbortHandler) // short of its Content-Length
}

// ReleaseStalled ends the hold of path's answer and reports whether the
// origin still held it: false once the sidecar had ended its call, or
// when no call of path came.
func (o *Origin) ReleaseStalled(path string) (held bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.stalled[path]
	if c == nil {
		return false
	}
	delete(o.stalled, path)
	close(c.release)
	return !c.cut
}
