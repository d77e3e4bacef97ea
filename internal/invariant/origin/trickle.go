package origin

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// TrickleHeader names a trickled write (the harness's doTrickled): the
// origin bumps its resource as the header arrives, notes the version
// (TrickledWrite), and then reads the body, which stops halfway: the sidecar
// must cut it at its read_timeout.
const TrickleHeader = "X-Trickle"

// Trickled is a trickled write as the origin applied it.
type Trickled struct {
	Res string
	Ver int
}

// TrickledWrite is what the trickled write id did; false if it never
// arrived.
func (o *Origin) TrickledWrite(id string) (Trickled, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.trickled[id]
	return t, ok
}

// trickle bumps res for the trickled write id and reads its body to the
// end, which never comes whole.
func (o *Origin) trickle(w http.ResponseWriter, r *http.Request, res, id string) {
	o.mu.Lock()
	o.ver[res]++
	o.lm[res] = time.Now().Truncate(time.Second).Add(time.Second)
	ver := o.ver[res]
	o.trickled[id] = Trickled{Res: res, Ver: ver}
	o.mu.Unlock()
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return // cut, as it must be
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(Stamp{Res: res, Ver: ver})
}
