package check

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sidecache/sidecache/internal/invariant/origin"
	"github.com/sidecache/sidecache/internal/invariant/traffic"
)

// ackList holds later reads of each id a write to a list endpoint names
// (write-list: PATCH /u?ids=1,2) to the version the origin's answer says
// it wrote, as a write to the id's own path would be (own-write through
// its replica, max-lag through any): its 200 lists one stamp per id.
func (ch *Checker) ackList(q *traffic.Request, resp *http.Response, body []byte, end time.Time) {
	if resp.StatusCode != http.StatusOK {
		return // refused or failed: acknowledged as nothing
	}
	var sts []origin.Stamp
	if err := json.Unmarshal(body, &sts); err != nil {
		ch.Violate("garbled", "%s: list write answer: %v: %.80q", q, err, body)
		return
	}
	asked := canonIDs(q.Ids)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, st := range sts {
		if !slices.Contains(asked, st.ID) || st.Res != q.Route+"/"+st.ID {
			ch.violations = append(ch.violations, Violation{Kind: "resource", Msg: fmt.Sprintf("%s: list write answered for %s (%s), not asked for", q, st.Res, st.ID)})
			continue
		}
		ch.ackLocked(st.Res, ack{path: q.Path + "?" + q.Query, ver: st.Ver, at: end, replica: q.Replica})
	}
	ch.checked["write-list"]++
	ch.checked["write-list-ids"] += len(sts)
}
