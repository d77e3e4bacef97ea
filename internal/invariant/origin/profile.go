package origin

import (
	"time"
)

// Profile is how the origin answers one resource during one round.
type Profile struct {
	Dims []Dim
	// VarySep, when set, is what the answer's Vary names are joined
	// with instead of ", " (a blank, ";"), and ends a Vary of one name
	// (vary-malformed): no list of field names, so no reading of it is
	// the answer's.
	VarySep string
	Gzip    bool // gzip when accepted, Vary: Accept-Encoding
	Size    int  // body bytes before coding (at least the stamp)
	Delay   time.Duration
	// Hold: on QueueBulkProfile, each bulk call waits for it to close
	// (nil: none), after Delay (list-crowd-retry, retry.go).
	Hold  <-chan struct{}
	Fail  int // percent of reads answered 500/503
	Hang  int // percent of reads hung up on
	Trunc int // percent of reads whose chunked body is broken off halfway
	// Stall: percent of pass-through reads whose chunked body stops
	// halfway, the connection kept open until the sidecar closes it (at
	// most a minute).
	Stall int
	Hints int  // 103 Early Hints sent before each read's answer
	ETag  bool // send an ETag; If-None-Match answered 304 when it matches
	// WeakETag: the ETag is weak (W/"…"), as many frameworks send.
	WeakETag bool
	// LastMod: send Last-Modified (see Origin.write)
	// and answer If-Modified-Since with 304 when it holds.
	LastMod bool
	// WriteFaults: writes fail (Fail) or hang up (Hang) too, after the
	// version was bumped, so the client is not told of a write that
	// happened.
	WriteFaults bool
	// Refuse: percent of writes answered 405 or 409 without a bump.
	Refuse int
	// GzipFrom: with Gzip, bodies shorter than this go out identity (still
	// with Vary: Accept-Encoding), as Express's compression() does.
	GzipFrom int
	// Trailers: percent of answers (reads and their failures; on
	// BulkProfile, bulk answers) that end with trailers (trailers.go).
	Trailers int
	// Large: on BulkProfile, the elements of ids that are multiples of
	// 4 are padded to this many bytes (over the replicas'
	// max_body_bytes: records too large to keep).
	Large int
	// Big: on BulkProfile, the other elements are padded to this many
	// bytes (under max_body_bytes: records that fit alone, a few of them
	// together over it).
	Big int
	// BOM: on BulkProfile, every array answered starts with a UTF-8
	// byte order mark (bulk-bom), as a .NET app's Encoding.UTF8 writer
	// sends it: the same array (RFC 8259 §8.1).
	BOM bool
	// NullAbsent: on BulkProfile, the bulk endpoint of route u writes
	// null in the place of an absent id (AbsentID) rather than leave it
	// out (bulk-null), as a DataLoader batch function answers an id it
	// does not know.
	NullAbsent bool
	// EchoPadded: on BulkProfile, the elements of ids up to 64 that
	// are multiples of 5 name their id with a leading zero ("05" for 5:
	// bulk-echo-spelling, EchoesPadded), as an app that prints its ids
	// padded does; the id asked is never absent for it.
	EchoPadded bool
	// StaleAtOnce: answers say Cache-Control: max-age=0, so on a
	// freshness: origin route with stale_if_error every stored copy is
	// stale at once and answers only when a refetch fails.
	StaleAtOnce bool
	// Lie: percent of reads that carry no condition answered against
	// HTTP (lie.go): a 304 Not Modified, or a 200 framed by both
	// Content-Length and Transfer-Encoding, each marked LieHeader.
	Lie int
	// Partial: on StaleBulkProfile, percent of bulk calls answered 206
	// with the first half of the list (Content-Range: items), each
	// element stamped Part (bulk-206).
	Partial int
	// Continue: percent of writes and reads the origin answers first
	// with a 100 Continue of its own, asked for or not (RFC 9110 §15.2.1:
	// a client must read past an unexpected 1xx); a third of them with
	// two (origin-continue).
	Continue int
	// Withhold: the answers' Cache-Control, a qualified private or
	// no-cache naming SecretHeader, which every answer carries with the
	// caller's address (withheld-field): a shared cache must never hand
	// it to another client, stored or collapsed (RFC 9111 §5.2.2.4,
	// §5.2.2.7).
	Withhold string
	// CodingLines: a gzip answer says so on two Content-Encoding lines,
	// an empty or identity one first (coding-lines): one list, gzip (RFC
	// 9110 §5.3).
	CodingLines bool
	// NotModifiedCoding: a 304 to a request that accepts gzip says
	// Content-Encoding: gzip, whatever the coding of what it confirms
	// (304-coding): a cache must keep its stored body's own (RFC 9111
	// §3.2).
	NotModifiedCoding bool
}
