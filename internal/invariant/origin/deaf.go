package origin

import (
	"io"
	"net/http"
	"time"
)

// DeafHeader marks a write of the client-body row (the harness's
// doClientBody), which the origin never applies: "deaf", its body is
// never read (the handler waits, as an app whose workers are all busy,
// until the sidecar gives up or a minute passed); "bad-chunk", its body
// is read to its failure.
const DeafHeader = "X-Invariant-Deaf"

// deaf answers a write marked DeafHeader (see there).
func (o *Origin) deaf(w http.ResponseWriter, r *http.Request, kind string) {
	if kind != "deaf" {
		_, _ = io.Copy(io.Discard, r.Body)
		panic(http.ErrAbortHandler)
	}
	// The request's context ends only once its body was read (net/http's
	// background read starts then): the wait is bounded instead.
	select {
	case <-r.Context().Done():
	case <-time.After(20 * time.Second):
	}
	panic(http.ErrAbortHandler)
}
