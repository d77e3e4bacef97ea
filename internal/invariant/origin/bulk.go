package origin

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The origin's bulk endpoints (/u, and /e with its elements' own
// validators), its ranges and its path decoding.

// MaxID is the largest ID the origin's bulk endpoint parses; a larger one
// (bad-ids feature) fails the whole bulk call.
const MaxID = 1<<31 - 1

// BulkProfile is the profile name of the bulk endpoint; its Gzip answers
// as Express's compression() does: Vary: Accept-Encoding on every answer,
// gzip when the request accepts it, its Delay holds every bulk call
// (crowd rounds), and its Dims make every element for the caller's
// address and say so as Dim.How does ("vary": Vary: X-Forwarded-For,
// "private": Cache-Control: private; "set-cookie": a Set-Cookie minted
// for the address, each element marked Stamp.Cookie), the
// bulk-per-address and bulk-set-cookie features; its other fields are
// not read.
const BulkProfile = "u/*"

// StaleBulkProfile is the profile of the bulk endpoint /s (route s:
// freshness: origin, stale_if_error, and its split list): its
// StaleAtOnce, Dims (lang as Vary, addr as private), Hang and Fail (503:
// the whole batch fails, not isolated) and Partial (206) are read
// (split-stale, bulk-206).
const StaleBulkProfile = "s/*"

// QueueBulkProfile is the profile of the bulk endpoint /q (route q, whose
// batch max_size 2 and max_in_flight 1 make its queue bound small enough
// for a round to reach: list-crowd-queue); only its Delay is read, and it
// never fails.
const QueueBulkProfile = "q/*"

// Crowd rounds' ids (the runner's crowd.go): good ones are crowdBase+crowdSpan·round+i,
// above every id an ordinary round draws (1-64); bad ones are 20 digits,
// "8", the round in 5 digits and 14 random ones, over MaxID and over
// 2⁶⁴ like an ordinary round's bad ids, which start with 9.
const (
	crowdBase = 100000
	crowdSpan = 1000
)

// RefusedID is an id of the list-refused row: 21 digits, "7" and 20 drawn
// from rnd, over MaxID (and 2⁶⁴) so the bulk endpoint cannot parse it, as
// the other bad ids, but always refused with 400 when it is the first
// such id of a call (IsRefusedID), never 500: the answer a validating
// framework gives, the same for the list whole and for any part of it.
// No other draw makes an id of 21 digits.
func RefusedID(rnd uint64) string { return fmt.Sprintf("7%020d", rnd%1e19) }

// IsRefusedID reports whether id is a RefusedID.
func IsRefusedID(id string) bool { return len(id) == 21 && id[0] == '7' }

// BOM is the UTF-8 byte order mark the bulk endpoint starts its arrays
// with while Profile.BOM is on (bulk-bom).
const BOM = "\xef\xbb\xbf"

// The absent ids (bulk-null): ids of route u the origin does not have,
// whatever the round, above every id an ordinary round draws (1-64) and
// below the crowd rounds' (crowdBase). Called directly (GET /u/70) it
// answers 404; its bulk endpoint leaves them out of its answer, or, while
// Profile.NullAbsent is on, writes null in their place, as a DataLoader
// batch function does (ids.map(id => rows.find(…) || null)).
const (
	absentBase = 70
	absentSpan = 8
)

// AbsentID is the i-th absent id (i modulo absentSpan).
func AbsentID(i int) string { return strconv.Itoa(absentBase + i%absentSpan) }

// Absent reports whether n is an absent id (AbsentID).
func Absent(n uint64) bool { return n >= absentBase && n < absentBase+absentSpan }

// AbsentPath reports whether the id of a /u/{id} path, as the origin
// parses it, is an absent one.
func AbsentPath(path string) bool {
	n, err := strconv.ParseUint(path[strings.LastIndexByte(path, '/')+1:], 10, 64)
	return err == nil && Absent(n)
}

// EchoesPadded reports whether the bulk endpoint names id n's element
// with a leading zero while Profile.EchoPadded is on (bulk-echo-spelling):
// one in five of the ids the rounds draw (5 of the one-id reads' 1-8,
// 5 to 60 of the lists' 1-64).
func EchoesPadded(n uint64) bool { return n <= 64 && n%5 == 0 }

// CrowdID is the i-th good id of crowd round round.
func CrowdID(round, i int) string { return fmt.Sprint(crowdBase + round*crowdSpan + i + 1) }

// CrowdBadID is a bad id of crowd round round.
func CrowdBadID(round int, rnd uint64) string {
	return fmt.Sprintf("8%05d%014d", round, rnd%1e14)
}

// CrowdRound reports the crowd round whose id id is, if it is one.
func CrowdRound(id string) (int, bool) {
	if len(id) == 20 && id[0] == '8' {
		k, err := strconv.Atoi(id[1:6])
		return k, err == nil
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n < crowdBase || n > MaxID {
		return 0, false
	}
	return int((n - crowdBase) / crowdSpan), true
}

// countCrowd counts a bulk call of ids (comma-separated) against the
// crowd round of its first crowd id: a call holds ids of one round only,
// as a crowd round's batches hold only its own ids (its pool is fresh,
// and no ordinary round runs beside it).
func (o *Origin) countCrowd(ids string) {
	for id := range strings.SplitSeq(ids, ",") {
		if k, ok := CrowdRound(id); ok {
			o.mu.Lock()
			o.crowd[k]++
			o.mu.Unlock()
			o.CrowdCalls.Add(1)
			return
		}
	}
}

// HoldQueue holds every /q bulk call until gate is closed (nil: none
// held), and starts QueueHigh again from the calls being served.
func (o *Origin) HoldQueue(gate chan struct{}) {
	o.mu.Lock()
	o.queueGate = gate
	o.mu.Unlock()
	o.QueueHigh.Store(o.QueueBusy.Load())
}

func (o *Origin) bulk(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/u" {
		n := o.UserBulk.Add(1)
		defer o.UserBulk.Add(-1)
		for h := o.UserBulkHigh.Load(); n > h && !o.UserBulkHigh.CompareAndSwap(h, n); h = o.UserBulkHigh.Load() {
		}
	}
	if r.URL.Path == "/q" {
		n := o.QueueBusy.Add(1)
		defer o.QueueBusy.Add(-1)
		for h := o.QueueHigh.Load(); n > h && !o.QueueHigh.CompareAndSwap(h, n); h = o.QueueHigh.Load() {
		}
		o.mu.Lock()
		gate := o.queueGate
		o.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		}
	}
	out := []*Stamp{} // never null, though every id is absent; nil: a null element (bulk-null)
	prof := BulkProfile
	switch r.URL.Path {
	case "/s":
		prof = StaleBulkProfile
	case "/q":
		prof = QueueBulkProfile
	}
	o.mu.Lock()
	p := o.profiles[prof]
	delay, pct, dims, hold := p.Delay, p.Trailers, p.Dims, p.Hold
	roll := 100
	if p.Hang+p.Fail+p.Partial > 0 {
		roll = o.rng.IntN(100)
	}
	o.mu.Unlock()
	if fault(w, roll, p.Hang, p.Fail, http.StatusServiceUnavailable, "origin failure") {
		return
	}
	partial := roll < p.Hang+p.Fail+p.Partial
	tr := o.drawTrailing(r, pct, url.Values{"ids": {r.URL.Query().Get("ids")}})
	if delay > 0 {
		// A slow bulk endpoint (crowd rounds): batches stay pending
		// while other requests' ids join them.
		time.Sleep(delay)
	}
	if hold != nil {
		<-hold
	}
	// An answer made for the caller (its address): each element says
	// whom for (Stamp.By), the answer how (Vary or private).
	var by map[string]string
	var vary []string
	cookie := false
	for _, d := range dims {
		if by == nil {
			by = map[string]string{}
		}
		by[d.Name] = dimValue(r, d.Name)
		switch d.How {
		case "vary":
			vary = append(vary, dimHeader[d.Name])
		case "private":
			w.Header().Set("Cache-Control", "private")
		case "private-stray":
			w.Header().Set("Cache-Control", StrayPrivate[d.Spelling%len(StrayPrivate)])
		case "targeted-nostore":
			setTargetedNoStore(w.Header(), d.Spelling)
		case "set-cookie":
			// Minted for the caller (bulk-set-cookie): private, and
			// its caller's to keep.
			w.Header().Add("Set-Cookie", "minted="+by[d.Name]+"; Path=/")
			cookie = true
		}
	}
	if p.StaleAtOnce && w.Header().Get("Cache-Control") == "" {
		w.Header().Set("Cache-Control", "max-age=0")
	}
	o.mu.Lock()
	if o.profiles[BulkProfile].Gzip && prof == BulkProfile {
		vary = append(vary, "Accept-Encoding")
	}
	if len(vary) > 0 {
		w.Header().Set("Vary", strings.Join(vary, ", "))
	}
	for _, id := range strings.Split(r.URL.Query().Get("ids"), ",") {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil || n > MaxID {
			o.mu.Unlock()
			// One id list, one answer: 400 or 500 by its hash, so
			// both ways a bulk call fails are in the mix; always 400
			// at a refused id (the list-refused row).
			code, msg := http.StatusBadRequest, "bad id "
			if fnv([]byte(r.URL.RawQuery))%2 != 0 && !IsRefusedID(id) {
				code, msg = http.StatusInternalServerError, "cannot parse "
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			tr.header(w.Header())
			w.WriteHeader(code)
			fmt.Fprintln(w, msg+id)
			tr.send(w)
			return
		}
		if Absent(n) && r.URL.Path == "/u" {
			// No such record (bulk-null): left out, or null in its
			// place as a DataLoader batch function answers it.
			if o.profiles[BulkProfile].NullAbsent {
				out = append(out, nil)
				o.Nulls.Add(1)
			}
			continue
		}
		res := r.URL.Path[1:] + "/" + strconv.FormatUint(n, 10)
		st := &Stamp{ID: strconv.FormatUint(n, 10), Res: res, Ver: o.ver[res], By: by}
		if EchoesPadded(n) && o.profiles[BulkProfile].EchoPadded && prof == BulkProfile {
			st.ID = "0" + st.ID // bulk-echo-spelling
		}
		if r.URL.Path == "/e" {
			st.Tag = elementTag(n, st.Ver, bySalt(by))
		}
		if lg := o.profiles[BulkProfile].Large; lg > 0 && n%4 == 0 && prof == BulkProfile {
			st.Pad = strings.Repeat("p", lg)
		} else if big := o.profiles[BulkProfile].Big; big > 0 && prof == BulkProfile {
			st.Pad = strings.Repeat("b", big)
		}
		st.Part, st.Cookie = partial, cookie
		out = append(out, st)
	}
	gz := o.profiles[BulkProfile].Gzip && prof == BulkProfile && AcceptsGzip(r.Header.Values("Accept-Encoding"))
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	tr.header(w.Header())
	defer tr.send(w)
	if partial {
		// Part of the list (RFC 9110 §15.3.7): the first half of it,
		// which the sidecar must not take for the whole.
		o.Partials.Add(1)
		n := len(out)
		out = out[:(n+1)/2]
		w.Header().Set("Content-Range", fmt.Sprintf("items 0-%d/%d", len(out)-1, n))
		w.WriteHeader(http.StatusPartialContent)
	}
	var bom []byte
	if o.profiles[BulkProfile].BOM && prof == BulkProfile {
		bom = []byte(BOM) // bulk-bom
	}
	if gz {
		b, _ := json.Marshal(out)
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(gzipBytes(append(bom, b...)))
		return
	}
	_, _ = w.Write(bom)
	json.NewEncoder(w).Encode(out)
}

// oneRange reads a single "bytes=a-b" / "bytes=a-" / "bytes=-n" range of a
// body of n bytes (RFC 9110 §14.1.2); several ranges, or none that fits,
// are answered whole (the origin may ignore Range, §14.2).
func oneRange(v string, n int) (from, to int, ok bool) {
	spec, found := strings.CutPrefix(v, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, _ := strings.Cut(spec, "-")
	switch {
	case a == "":
		k, err := strconv.Atoi(b)
		if err != nil || k <= 0 {
			return 0, 0, false
		}
		from, to = max(0, n-k), n-1
	default:
		f, err := strconv.Atoi(a)
		if err != nil {
			return 0, 0, false
		}
		from, to = f, n-1
		if b != "" {
			if t, err := strconv.Atoi(b); err == nil && t < n {
				to = t
			}
		}
	}
	return from, to, from <= to && to < n
}

// elementTag is the /e route's etag_field value for id at version ver,
// in each spelling an app may use: a bare version, an entity-tag (weak),
// a number, and text that is no entity-tag (a space: the sidecar must
// fall back to its own tag over the bytes). salt (bySalt) tells apart
// the answers made for different identities, as an app whose record
// depends on who asks gives each its own validator: the checks resolve a
// validator to the one copy it was sent with, and a tag shared by two
// identities' bodies (the same version) made a 304 to one client look
// like the other's copy kept (seen with the draws shifted: bob's GET /e/4
// with dave's "v0").
func elementTag(id uint64, ver, salt int) any {
	switch id % 4 {
	case 0:
		return fmt.Sprintf("v%d.%d", ver, salt)
	case 1:
		return fmt.Sprintf(`W/"v%d.%d"`, ver, salt)
	case 2:
		return (ver+1)*1000 + salt
	}
	return fmt.Sprintf("v %d %d", ver, salt)
}

// bySalt is a number under 1000 for the identity values an answer was
// made with (0: none).
func bySalt(by map[string]string) int {
	if len(by) == 0 {
		return 0
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(by)) {
		fmt.Fprintf(&b, "%s=%s;", k, by[k])
	}
	return 1 + int(fnv([]byte(b.String()))%999)
}

// decodeUnreserved decodes the percent-escapes of unreserved characters
// (RFC 3986 §6.2.2.2: %35 is "5", %2e "."), as Express's router does
// before matching; other escapes (%2F, %E9) stay as they are.
func decodeUnreserved(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil && unreserved(byte(v)) {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// GoodID reports whether the id of a /u/{id} path is one the bulk
// endpoint parses (MaxID).
func GoodID(path string) bool {
	n, err := strconv.ParseUint(path[strings.LastIndexByte(path, '/')+1:], 10, 64)
	return err == nil && n <= MaxID
}

// writeList applies a write to a list endpoint (PATCH /u?ids=1,2: the
// write-list row) to each id it names, read as Rails and PHP read a list
// parameter (commas, the parameter repeated, ids[], blanks around an id),
// and answers one stamp per id, in the order named.
func (o *Origin) writeList(w http.ResponseWriter, r *http.Request) {
	q, _ := url.ParseQuery(r.URL.RawQuery)
	out := []Stamp{}
	o.mu.Lock()
	for _, v := range append(q["ids"], q["ids[]"]...) {
		for id := range strings.SplitSeq(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(id), 10, 64)
			if err != nil || n > MaxID {
				continue
			}
			res := r.URL.Path[1:] + "/" + strconv.FormatUint(n, 10)
			o.ver[res]++
			o.lm[res] = time.Now().Truncate(time.Second).Add(time.Second) // as write's
			out = append(out, Stamp{ID: strconv.FormatUint(n, 10), Res: res, Ver: o.ver[res]})
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
