// Package mix is the invariant harness's table of inputs: one row per
// request feature or origin behaviour the randomized runs may draw, and
// the Mix a run draws from (the On rows, changed by INVARIANT_FEATURES).
// It is its own package so that the clients, the origin and the runner
// all read one table, and a row's gate is visible without reading them.
package mix

import (
	"slices"
	"strings"
)

// Feature is one row of the randomized mix: a request feature the clients
// may use, or a behaviour the origin may show. A feature that is Off is
// never drawn in the fixed seeds; Gate names the issue item whose fix it
// waits for ("20.2"), so that whoever lands that fix flips On to true in
// the same change.
type Feature struct {
	Name string
	On   bool
	Gate string // issue item the feature waits for; "" when none
	// Heavy: off in the fixed seeds only for their wall time (a larger
	// variant of a row that is On); INVARIANT_FEATURES=all and the soak
	// draw it.
	Heavy bool
	Note  string
}

// Features is THE table of the mix. To add an input: add a row here, draw
// it where the clients (package traffic) or the origin's profiles (the
// runner's drawProfile, package origin) decide what to send or answer —
// `if mix.Has("name")` — and, when the input can break an invariant in a
// way the checks (package check) do not yet see, add that check. Keep each note to one line: what the input is and why it is
// hostile.
var Features = []Feature{
	// Who the clients are and what they send.
	{Name: "addr", On: true, Note: "each identity connects from its own loopback address (127.0.0.N)"},
	{Name: "cookie", On: true, Note: "requests carry the identity's Cookie: sid=<name> (bypasses the cache)"},
	{Name: "auth", On: true, Note: "requests carry Authorization: Bearer <name> (bypasses the cache)"},
	{Name: "accept-encoding", On: true, Note: "Accept-Encoding gzip, identity, gzip;q=0 or none"},
	{Name: "accept-language", On: true, Note: "Accept-Language en, fr, de or none"},
	{Name: "tenant", On: true, Note: "X-Tenant acme, globex, initech or none (keyed only once learned from Vary)"},
	{Name: "query-order", On: true, Note: "the same parameters in another order (?a=1&b=2 vs ?b=2&a=1)"},
	{Name: "accept-encoding-spellings", On: true, Note: "Accept-Encoding spelt as browsers do (gzip, deflate / gzip, deflate, br / …, zstd / br, gzip): one variant per coding served"},
	{Name: "query-repeat", On: true, Gate: "20.10", Note: "a repeated parameter's values in another order (lang=fr&lang=en vs lang=en&lang=fr)"},
	{Name: "query-escape", On: true, Gate: "20.10", Note: "invalid escapes and ';' kept verbatim (q=%zz vs q=%25zz, a=1;b=2 vs a=1%3Bb=2)"},
	{Name: "host-spelling", On: true, Note: "reads of /h/{id} (key.host: svc.invariant) as Host svc, svc.ns.svc.cluster.local, SVC.Invariant; one shared entry, so the upstream must only ever see the canonical X-Forwarded-Host"},
	{Name: "head", On: true, Note: "HEAD reads of /r/{id}, answered from the GET entry (or fetched with GET); checked by the stamp the origin also sends as X-Stamp"},
	{Name: "path-spelling", On: true, Note: "reads spelled /r/05, /r/5/, /R/5 (pass through: not the anchored route's spelling)"},
	{Name: "write", On: true, Note: "PATCH /r/{id} bumps the resource's version; the client records what was acknowledged"},
	{Name: "write-spelling", On: true, Gate: "20.11", Note: "writes spelled /r/05, /r/5/, /R/5, //r/5 that the origin takes for /r/5"},
	{Name: "write-lenient-id", On: true, Note: "writes spelled /r/%205, /r/5%20, /r/%095, /r/5-acme, /r/05-x that the origin reads as /r/5 (PostgreSQL's int4 input skips blanks; Rails' find reads leading digits): they must invalidate /r/5 (stream 31); and, on stream 39, spelled /r/0x5, /r/0X5, /r/0o5, /r/0b101, /r/0_5, /r/%EF%BC%95, /r/%C2%A05, /r/%EF%BB%BF5, /r/%E3%80%805%E3%80%80, /r/0.5e1, /r/50e-1, /r/500E-2, /r/50e-1-x, which stacks read differently (0x5 is 5 to PostgreSQL 16+ and JavaScript, 0 to Ruby; 50e-1-x is 5 to PHP and MySQL's comparison, 50 to Ruby) or only Python or JavaScript read as 5, and the origin as /r/5: each reading must be invalidated"},
	{Name: "route-tagged-read", On: true, Note: "reads of /r/{id}/summary, a route tagged r:{id} under another URI: only the write route's invalidate tags reach it (stream 31); and reads of /r/{id} and its summary through the stream-39 spellings of write-lenient-id, which must not be stored where a write to /r/{id} leaves them"},
	{Name: "write-method-override", On: true, Note: "writes to /r/{id} the origin applies as PATCH though their request line says otherwise (stream 47): POST with X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override or X_HTTP_Method_Override, POST with _method in the query or form body (Rails' edit forms): r:{id} must drop as for a PATCH; a lower-case patch (Werkzeug applies it as PATCH, no route of the sidecar's takes it) must be refused 400 unsent"},
	{Name: "write-applied-other", On: true, Note: "writes the origin applies and answers 303 See Other (Location: the resource), 502 or 504, with its stamp: acknowledged, so r:{id} must drop as the URI does (stream 31)"},
	{Name: "write-non-utf8", On: true, Gate: "20.6", Note: "writes to /t/caf%E9, a tag that is not UTF-8, read later through the peer"},
	{Name: "write-list", On: true, Note: "PATCH /u?ids=… and /e?ids=… (a split list's and a bulk path, the ids as commas, the parameter repeated, ids[] or with a blank) naming 1-5 of ids 1-8, which the origin applies to each id (stream 50): every later read of each, alone or in a split list, is held to it"},
	{Name: "write-hangup", On: true, Note: "the client hangs up as soon as its PATCH is sent (never acknowledged; the origin still applies it)"},
	{Name: "extra-param", On: true, Gate: "20.7a", Note: "parameters outside key.query (?fields=a&callback=x) that the origin echoes"},
	{Name: "request-id", On: true, Gate: "20.7b", Note: "the client's X-Request-Id, echoed by the origin"},
	{Name: "cookie-empty-first", On: true, Gate: "20.8", Note: "an empty first Cookie:/Authorization: line before the real one (forward_headers: all route)"},
	{Name: "no-cache", On: true, Gate: "20.5", Note: "request Cache-Control: no-cache / max-age=0 / Pragma: no-cache (ignored on route-mode routes, one refresh at a time where honoured)"},
	{Name: "long-accept-language", On: true, Gate: "20.13", Note: "a 6 KiB Accept-Language on a route that varies on it (key over max_key_bytes)"},
	{Name: "batch", On: true, Note: "per-ID reads of the batch route /u/{id} (merged into bulk calls)"},
	{Name: "bad-ids", On: true, Gate: "20.4", Note: "batch IDs that match the pattern but overflow the origin's int (bulk answers 400/500)"},
	{Name: "if-none-match", On: true, Note: "GET with If-None-Match naming ETags of the client's own copies (weak or strong, lists, a stale tag, *), on plain, batch one-id and split list routes: a 304 must keep a copy the client may have now"},
	{Name: "if-none-match-foreign", On: true, Note: "If-None-Match naming ETags another identity received, its private and per-identity answers included: a 304 must never confirm a validator of an answer this client could not get (no ETag oracle)"},
	{Name: "if-modified-since", On: true, Note: "GET with If-Modified-Since: a copy's Last-Modified (else Date) of the client's own variant, or a date far past / future; a 304 must never keep a copy older than a write the client saw, or than max_lag"},
	{Name: "if-unmodified-since", On: true, Note: "GET with If-Unmodified-Since: a precondition only the origin may evaluate (never a 304 or a stored answer's verdict)"},
	{Name: "batch-etag-field", On: true, Note: "reads and writes of /e/{id}, a batch route with batch.etag_field: the element's ETag is the app's field (bare, weak, a number, or not a tag at all)"},
	{Name: "duplicate-headers", On: true, Note: "Accept-Language, X-Tenant, Accept-Encoding (and If-None-Match lists) as two field lines, one of them empty or another value: one list to the origin (RFC 9110 §5.3), so one key"},
	{Name: "accept-encoding-q", On: true, Note: "odd Accept-Encoding lists and qvalues (gzip;q=0.001, *;q=0, *, gzip;q=0, GZIP, x-gzip, gzip;Q=0, identity;q=0, gzip): never a coding refused"},
	{Name: "range", On: true, Note: "Range on reads (one range, several, suffix, open); the origin answers 206 to one: a part must never reach a client that did not ask for it"},
	{Name: "absolute-form", On: true, Note: "request targets in absolute-form (GET http://svc.invariant/r/5, host spellings on /h): the authority is the Host (RFC 9112 §3.2.2), keyed and forwarded as such"},
	{Name: "percent-path", On: true, Note: "paths with escaped unreserved characters (/r/%35, /%72/5, /r/%2e/5) that the origin decodes, and /r/5%2F that it does not; on reads and writes"},
	{Name: "chunked-write", On: true, Note: "writes with a chunked body and trailers (Surrogate-Key, Cache-Control: no-store): trailers shape nothing"},
	{Name: "expect", On: true, Note: "writes with a body behind Expect: 100-continue"},
	{Name: "read-method-case", On: true, Note: "reads and lists spelled get, Get, gET, head, Head, hEAD (stream 53): no GET or HEAD to the sidecar (RFC 9110 §9.1), the read it spells to an app that folds case; forwarded as a write, the origin's 200 dropped the URI fleet-wide, so the sidecar's 400 unsent (detail=method-case), and no call with a lower-case method may reach the origin"},
	{Name: "expect-read", On: true, Note: "reads and lists (GET, HEAD; pass-through, lean loop, cached) saying Expect: 100-continue with no body (stream 35): the sidecar answers Expect itself, as NGINX does, so no upstream call (fill, bulk call, pass-through, write) may carry one; forwarded, a write waited for the upstream's 100 up to the Transport's ExpectContinueTimeout"},
	{Name: "obs-fold", On: true, Note: "a request with a header line folded onto the one before it (X-Fold: a, then ' Transfer-Encoding: chunked' beside a write's Content-Length, or a tab-folded value), on reads and writes: RFC 9112 §5.2, so it is answered the sidecar's 400 and closed, never framed by net/http's joined field and forwarded"},
	{Name: "obs-fold-lead", On: true, Note: "a folded request's connection first carries empty lines (CRLF, LF: RFC 9112 §2.2, ignored before a request line) and a valid request framed oddly as net/http frames it (a length after 130 blanks or of 19 digits, a chunk size of 16 hex digits, a 200-byte chunk extension or Transfer-Encoding line; OPTIONS with Max-Forwards: 0, the sidecar's own 200): that one answered, the fold after it still the sidecar's 400 (stream 36)"},
	{Name: "asterisk-form", On: true, Note: "the request target * (asterisk-form) on reads and writes: RFC 9112 §3.2.4 allows it for OPTIONS only, so it is answered 400 and closed, never forwarded as a path the client never sent (/%2A)"},
	{Name: "trickle-write", On: true, Note: "writes whose body stops halfway (some behind Expect: 100-continue, once the 100 came), sent to a third replica with read_timeout 500ms; the origin applies them as their header comes: answered 408 and closed, never a success (net/http's empty 200), and invalidated as applied (reads through the other replicas held to max-lag)"},
	{Name: "client-body", On: true, Note: "writes whose 64 MiB body the origin never reads (an app whose workers are all busy): answered 504 at upstream.timeout and closed, never held; and writes whose chunk size is past 2^63: the client's failure, 400 and closed, never a 502 upstream error"},
	{Name: "half-close", On: true, Note: "reads whose client shuts its sending side once the request is written: whatever it is sent is a whole, right answer (nothing at all when the request had to wait), never net/http's implicit empty 200"},
	{Name: "connection-hop", On: true, Note: "a client's Connection names X-Client-Hop, sent beside it: hop-by-hop, so no upstream call (per-ID fetch, bulk call, pass-through, write) may carry it (RFC 9110 §7.6.1)"},
	{Name: "underscore-forwarding", On: true, Note: "X_Forwarded_For, X-Forwarded_Host, X_Real_Ip, X_Tenant beside the real fields, and a forged X-Real-Ip and True-Client-Ip: CGI-style upstreams read '_' as '-', and applications behind NGINX trust X-Real-Ip, so no upstream call (per-ID fetch, bulk call, pass-through, write) may carry an underscore spelling of a field the sidecar writes or keys on, nor a client's address claim"},
	{Name: "vary-user-agent", On: true, Note: "0-3 reads a round of /a/{id}, whose answers Vary: User-Agent, a header route a withholds until an answer's Vary names it, each with the identity's own User-Agent, one all identities send, or an empty one (none on the wire): the answer must be the one made for the User-Agent the client sent, never the origin's answer to none (the fetch that withheld it) stored as a client's variant (stream 41)"},
	{Name: "keyed-headers", On: true, Note: "reads of /k/{id}, a route with key.headers [X-Tenant, Accept-Language] whose answers depend on both and say so nowhere (no Vary): the key alone keeps tenants and languages apart"},
	{Name: "connection-keyed", On: true, Note: "a client's Connection names a header the request carries that the key holds or the answer varies on (Accept-Language, X-Tenant, Cookie, Authorization): the origin never receives it, so the answer is the one made without it, and never stored under the value sent (the identity check)"},
	{Name: "list-as-asked", On: true, Note: "a quarter of the split lists of routes u and s name an id twice (5,5) or spell one with a leading zero (05): the origin lists a repeated id each time and reads 05 as 5, so such a list must be its own answer (one element per id asked, in order), never one assembled per id"},
	{Name: "list-crowd", On: true, Note: "every 22nd round: 60 concurrent split lists of 12-24 fresh ids (pool of 48) and 20 one-id reads of them, over a slow, healthy bulk endpoint: every answer a 200"},
	{Name: "list-crowd-hangup", On: true, Note: "in crowd rounds, one list in eight hangs up once its request is written, while the slow bulk endpoint holds its ids' batches: a batch every waiter of which left is dropped unsent, never one another list or read still waits on (collateral), and the hung-up list's budget still bounds what it caused"},
	{Name: "list-crowd-queue", On: true, Note: "beside round 30 (every 80th from it): on route q (batch max_size 2, max_in_flight 1: a queue of 28 ids), one list of 40 ids per replica holds the queue, then 24 lists and 16 one-id reads of fresh ids at once: 200, 503 with Retry-After or 504 only, a one-id read answered per replica (the fair share), sidecache_batch_dropped_total = the ids refused"},
	{Name: "list-crowd-retry", On: true, Note: "beside round 40 (every 80th from it): on route q (a queue of 28 ids, 7 the one-id misses' own), 24 lists per replica of a bad id and a good one share one held bulk call, whose failure is retried for the lists; one-id reads of fresh good ids sent then answer 200 (or 504), never 503: lists' retries are lists' ids, not the one-id misses' quarter; and the retries hold the failed call's ids once, not once per list (48 ids past the queue's 28): at most 4 /q calls hold a replica's bad id (queue-retry-bound; PCG stream 69)"},
	{Name: "list-crowd-large", On: false, Heavy: true, Note: "list-crowd every 8th round with 200 lists (pool of 96) and 50 one-id reads, as make bench's batch row; off in the fixed seeds for wall time only"},
	{Name: "list-crowd-bad", On: false, Heavy: true, Note: "every other crowd round, one list in twenty carries a bad id of its own among its good ones: it may fail, the good lists and one-id reads sharing its batches may not; off in the fixed seeds for wall time only"},
	{Name: "batch-hosts", On: true, Note: "in crowd rounds, 32 more one-id reads of /u through one replica, each under a Host spelling of its own (h0.svc.invariant, …): a batch group each, so the route's bulk calls in flight must stay within batch.max_route_in_flight per replica, not max_in_flight per Host"},
	{Name: "bulk-per-address", On: true, Note: "bulk answers made for the caller's address, saying so with Vary: X-Forwarded-For or Cache-Control: private: a member of a shared bulk call (one-id read or split list) must get the answer made for its own address, never the opener's"},
	{Name: "bulk-set-cookie", On: true, Note: "a third of the bulk-per-address answers set a cookie minted for the caller's address instead (stream 63): never shared, and the request whose call it was (the opener, or a member's own call) must get it with its elements, as it would from the upstream directly"},
	{Name: "bulk-echo-spelling", On: true, Note: "one round in four (stream 63), the bulk endpoint names the elements of ids 5, 10, … 60 with a leading zero (\"05\"), as an app that prints its ids padded or reads a slug as its number: such an id is no absent one (no 404, never left out of a list), its request and a list holding it the origin's own answer"},
	{Name: "bulk-bom", On: true, Note: "one round in five (stream 63), the bulk endpoint starts its arrays with a UTF-8 byte order mark, as a .NET app's Encoding.UTF8 writer does: the same array (RFC 8259 §8.1), never a 502 for a good id (collateral)"},
	{Name: "bulk-null", On: true, Note: "two rounds in six (stream 72), the bulk endpoint writes null in the place of an id it does not have (70-77), as a DataLoader batch function does, one in six it leaves the id out; those rounds read absent and good ids on one replica and list both: an absent id's read is 404, never 502, a good id's 200, the list its good ids as asked, within the budget"},
	{Name: "bulk-big", On: true, Note: "bulk answers whose elements fit max_body_bytes alone but two or more are over it (D3): read no further than the bound, retried apart, lists passed through; never a 502 for a good id (collateral)"},
	{Name: "bulk-large", On: true, Note: "bulk answers whose elements for ids that are multiples of 4 are over max_body_bytes × 3 (records too large to keep alone): passed through, never a 502 for a good id (collateral), nothing stored"},
	{Name: "split-stale", On: true, Note: "reads and split lists of /s, a batch route with stale_if_error whose bulk answers are stale at once, vary on Accept-Language, are private (members fetch their own) and fail 503 or hang up: every stale id served passes the identity checks, and an id whose copy is held never fails, whichever call failed, while its replica can read it (no coherence refusal, no L2 error: held.go)"},
	{Name: "bulk-206", On: true, Note: "the /s bulk endpoint answers 206 with the first half of the list: only a 200 or 203 is split, so no element of it may reach a client, alone or in a list"},
	{Name: "bulk-vary-withheld", On: true, Note: "/s bulk answers with Vary: X-Tenant, a header the route withholds until learned: the opener of that bulk call, which sent X-Tenant, must not get the answer made without it (it fetches its own with the header, as the per-key path asks once more); odd seeds only, whose route-s stale-if-error check is off (run.withheld)"},
	{Name: "bulk-vary-gzip", On: true, Gate: "24.1", Note: "bulk answers as behind compression(): Vary: Accept-Encoding always, gzip when accepted (elements must still be identity, shared)"},

	// What the origin does, drawn per resource per round and per request.
	{Name: "vary", On: true, Note: "answers vary on a random subset of Accept-Encoding, Accept-Language, X-Tenant"},
	{Name: "vary-malformed", On: true, Note: "a quarter of the answers with a Vary join its names with a blank or ';' (Accept-Language X-Tenant, X-Tenant;): no list of field names, so on route p (forward_headers: all) the tenant's or language's answer must not be stored under a key that holds neither (stream 56)"},
	{Name: "learned-unvaried", On: true, Note: "/r answers that read Accept-Language or X-Tenant without naming it in Vary while other /r answers name it, so the route learns it and forwards it on every path: an answer made for one client's value must never be stored for the others"},
	{Name: "vary-xff", On: true, Gate: "20.2", Note: "per-IP answers that say Vary: X-Forwarded-For (a header the sidecar writes)"},
	{Name: "private", On: true, Note: "per-IP answers with Cache-Control: private"},
	{Name: "private-stray", On: true, Note: "half the private answers (per-key and bulk) spell it with other separators than commas (private; max-age=0, max-age=60 private, public;no-store, no-cache; no-store), as NGINX and Varnish still read as private: never stored nor shared (stream 55)"},
	{Name: "targeted-nostore", On: true, Note: "a third of the private answers left (per-key and bulk) say Cache-Control: max-age=60 and no-store in a Surrogate-Control or CDN-Cache-Control instead (no-store, max-age=60;no-store, no-store;edge1, CDN-Cache-Control: max-age=60 beside Surrogate-Control: no-store): never stored nor shared, in either freshness mode (stream 60)"},
	{Name: "set-cookie", On: true, Note: "answers with a Set-Cookie minted for the caller's address"},
	{Name: "set-cookie2", On: true, Note: "half the set-cookie answers mint an obsolete Set-Cookie2 (RFC 2965) instead: it makes an answer private as Set-Cookie does (stream 49)"},
	{Name: "per-credential", On: true, Note: "answers per Cookie / Authorization with no Cache-Control (the bypass must keep them)"},
	{Name: "gzip", On: true, Note: "gzip when accepted, with Vary: Accept-Encoding"},
	{Name: "gzip-threshold", On: true, Note: "Vary: Accept-Encoding on every answer but gzip only from 1 KiB, as Express's compression(): small answers are identity to all"},
	{Name: "large", On: true, Note: "bodies over max_body_bytes (streamed uncached), some private, some gzip"},
	{Name: "large-identity", On: true, Note: "bodies whose identity form is over max_body_bytes and whose gzip form fits"},
	{Name: "slow", On: true, Note: "answers delayed 20-250 ms, so concurrent requests collapse"},
	{Name: "5xx", On: true, Note: "500/503 answers"},
	{Name: "stale-if-error", On: true, Note: "/n answers vary (language, tenant, gzip), fail 500/503 and some say max-age=0: stored copies are stale at once, served only on a failure, each to its own variant only (replicas with cold L1 collapse variants onto one flight)"},
	{Name: "304", On: true, Note: "ETags (one per version, variant, Vary and Cache-Control); If-None-Match answered 304 when it matches (weak comparison, *)"},
	{Name: "last-modified", On: true, Note: "Last-Modified (the write's second rounded up, sent once Date reaches it, so it names one version); If-Modified-Since answered 304 when it holds and no If-None-Match was sent"},
	{Name: "upstream-lie", On: true, Note: "reads that reach the origin with no condition answered 304 Not Modified, or 200 framed by both Content-Length and Transfer-Encoding (X-Origin-Lie): answered 502 on every path, never relayed or stored (RFC 9110 §15.4.5, RFC 9112 §6.3)"},
	{Name: "hangup", On: true, Note: "the origin closes the connection without answering"},
	{Name: "truncate", On: true, Gate: "21.3", Note: "the origin breaks a chunked body off halfway (no last chunk): the client must see it broken, never whole"},
	{Name: "stall", On: true, Gate: "h3-2-budget", Note: "the origin stops a pass-through's chunked body halfway and keeps the connection open: cut upstream.timeout after its last byte, the client must see it broken, never whole, nor be held until its own timeout"},
	{Name: "1xx-flood", On: true, Gate: "21.4", Note: "the origin sends 20 103 Early Hints before its answer: at most relay.MaxRelayed reach a client"},
	{Name: "trailers", On: true, Note: "answers (reads, 5xx, bulk) end with trailers, announced or not: X-Trail names the call and whom it answered; forbidden names (Set-Cookie, Cache-Control, Connection, tag headers) must never be relayed; a stored or shared answer carries none"},
	{Name: "origin-continue", On: true, Note: "the origin sends a 100 Continue of its own (one, or two) before some answers to writes and reads, asked for or not: it answers the sidecar's request, so at most one 100 (net/http's own, behind Expect) reaches a client, and a final answer follows"},
	{Name: "write-fail", On: true, Note: "writes answered 500 or hung up after bumping (not acknowledged)"},
	{Name: "purge", On: true, Note: "in some rounds, while a fill of a resource one of its reads asks for is in flight (slow answers), the origin changes it behind the cache and an admin POST /purge?key= (or ?tag=) drops it: no answer older than the acknowledged purge after it (own replica) or after max_lag (peers)"},
	{Name: "upgrade", On: true, Note: "after one round in seven, upgrade requests through one replica (allow_upgrades [websocket], max_tunnels 2, tunnel_idle_timeout 250ms) to an origin that echoes, switches unasked, refuses with 200, closes, hangs up or stays silent; forged forwarding fields, cached routes, cached reads on the same connection: a tunnel's bytes reach only its own ends, nothing of it is stored, no unasked 101 is relayed, past the cap 503 + Retry-After unsent, silent tunnels cut and counted (upgrade.go)"},
	{Name: "mismatch-vary", On: true, Note: "after one round in four (stream 59), twice a run at most, one replica reads a resource of route n twice with a field of its own: the origin's 304 names another ETag than the stored one, and the unconditional answer then varies on that field, unsent: each read costs at most 2 upstream calls, counted per client request (budget-request), and answers its own variant, the stored one (stale_if_error) or a 502/504 (mismatch.go)"},
	{Name: "stalled-length", On: true, Note: "after one round in four (stream 61), three times a run at most, a pass-through GET (lean loop) or PATCH (ReverseProxy) whose answer the origin sends with a Content-Length, its header and 0, 8 or 1000 bytes, then holds: the client must read the status line and those bytes while the origin holds the rest (held in the write buffer, it got nothing until upstream.timeout cut the call), then see the body broken, never whole (stalled.go)"},
	{Name: "send-budget", On: true, Note: "after one round in ten (stream 65; draws on 66), a replica with server.max_pending_send_bytes 1 is sent 3-4 clients that never read (4 KiB receive buffers), one after the other, each pipelining reads of two /r resources of its own answered just under max_body_bytes until a write to it waits: each new waiting write cuts the one before (k-1 counted under send-budget, one waiting), the cut ones' answers end short, the last one's come whole and right, and a client that reads then gets every one whole and right (sendbudget.go)"},
	{Name: "header-budget", On: true, Note: "after one round in ten (stream 73), the send-budget replica (server.max_pending_header_bytes 16 KiB) is sent 3-4 clients, one after the other, each sending 6-7 KiB of a GET header section and stalling in it: after each, the sections held and cut are the model's (the largest other cut first, answered 431 and closed, counted under header-budget; the growing one never), an ordinary read sent at once is answered whole and right, and the kept ones, once they end their sections, are answered 200 (headerbudget.go)"},
	{Name: "conn-cap", On: true, Note: "after one round in five (stream 52), a replica with server.max_connections 4 is filled with idle keep-alive connections, then sent a write and reads on new connections, then held by 4 requests cut mid-header and sent one more read: each answered right (the oldest idle closed for it, or once a held one ends), the write held to own-write and max-lag, reaps and waits counted (conncap.go)"},
	{Name: "purge-all", On: true, Note: "in some rounds, at a random point (often while a fill is in flight), the origin changes every resource behind the cache and an admin POST /purge?all=1 goes to a random replica: no copy made before it after its answer (own replica) or after max_lag (peers), a fill in flight across it included"},
	{Name: "purge-route", On: true, Note: "as purge-all, with POST /purge?route=NAME of a route one of the round's reads asks for (r, p, n, t, k or h): every resource of that route changed behind the cache"},
	{Name: "reload-torn", On: true, Note: "between rounds, now and then, a replica applies its config file cut just before r-write's invalidate line (a half-written file applied), /r/{id} is written through it, and the whole file comes back: the summary copy stored before must not outlive the acknowledged write (a rule a reload regains drops what it may reach; stream 43); with bulk-vary-withheld, route s keeps the X-Tenant it learned across the reload (reload.go)"},
	{Name: "batch-reload", On: true, Note: "once a seed, between rounds, a replica reloads its unchanged file while a bulk call of route q (max_in_flight 1) is held at the origin, and a read of another id of the same group follows: it must wait behind the held call (the batcher kept across the reload), never make a second call of the group at once (stream 67, batchreload.go)"},
	{Name: "write-reload", On: true, Note: "with batch-reload, a write of /r/97 held at the origin before it is applied across a reload that regains its invalidate rule (the torn file, then the whole one), the summary read and stored meanwhile: once the write is acknowledged the summary read back must be its version (own-write: the write drops what the table at its answer invalidates; stream 67, batchreload.go)"},
	{Name: "reload-shadow", On: true, Note: "once a seed, between rounds, a replica (sometimes both) applies its config with a route before r-write that takes its PATCHes of /r/{id} and invalidates nothing, /r/95 is written through it, and the whole file comes back: the regained rule must drop the summary copies stored before (own-write at once, max-lag on the other replica; stream 45, shadow.go)"},
	{Name: "secret-token", On: true, Note: "once a seed, between rounds, a replica applies its config with admin.token quoted as a Secret made from a file expands it (its final newline inside the quotes, a trailing space to YAML), then the whole file again: meanwhile a purge and an inspect through it with the token itself answer 200 (PCG stream 70)"},
	{Name: "withheld-field", On: true, Note: "answers of r, p and n naming X-Secret in a qualified private or no-cache (stored or not), X-Secret holding the caller's address, slow so requests collapse: no other client may get the field (RFC 9111 §5.2.2.4, §5.2.2.7; stream 40)"},
	{Name: "coding-lines", On: true, Note: "gzip answers saying so on two Content-Encoding lines, an empty or identity one first: one list, gzip (RFC 9110 §5.3), never stored or served as identity (stream 40)"},
	{Name: "304-coding", On: true, Note: "304s to requests that accept gzip saying Content-Encoding: gzip (n answers then carry an ETag): a revalidated entry keeps its stored body's coding (RFC 9111 §3.2; stream 40)"},
	{Name: "restart-retag", On: true, Note: "once a seed, a replica started from a deploy's config in which r-summary is renamed r-digest and tagged rsum:{id} (r-write invalidates that instead of r:{id}) writes /r/61 and reads /r/61/summary, which an old replica stored in L2 just before: the old copy carries none of the new config's tags, so it must be a miss, never served past the acknowledged write (stream 46)"},
	{Name: "write-refused", On: true, Note: "writes answered 405 or 409 without bumping (refused: they invalidate nothing, and break nothing)"},

	// What Redis does.
	{Name: "evict-epochs", On: true, Gate: "epoch-evict", Note: "Redis has evicted (env), and between rounds a quarter of the time half the epoch keys (v:*, route s's kept) are deleted as eviction would: a lost epoch must stay a miss, its id refetched (a one-good-id list whose retry ran with another request's headers answered 502); route s's copies count as held on the receiving replica only (check.Config.HeldLocal: a new tag's first fill is not kept in L2 on an evicting Redis)"},
	{Name: "redis-oom", On: true, Gate: "oom-epoch", Note: "Redis over maxmemory under noeviction for 3-6 rounds mid-seed (stores, leases and plain scripts' SETs refused, reads and PUBLISH answered); a resource L2 holds is written meanwhile and read through a replica started at the stretch's end, and the two: no write undone past max_lag, replicas serve again once the memory is back (stream 42)"},
	{Name: "redis-refuses-writes", On: true, Note: "once a seed, between rounds, Redis refuses every write while it answers (min-replicas-to-write short of replicas: NOREPLICAS, as a failed snapshot's MISCONF), epoch and note raises included, heartbeats and PUBLISH going through; a resource L2 holds is written meanwhile, and once Redis takes writes again (past the replay's tries) it is read through a replica started then, and the two: no write undone past max_lag (stream 48); meanwhile the writing replica's /readyz says 200, l2 degraded, writes refused"},
	{Name: "readyz-refused-idle", On: true, Note: "in redis-refuses-writes, before the write, a replica that sent Redis no write since it began refusing must say so: /readyz 200, l2 degraded, writes refused, and sidecache_l2_writes_refused 1 beside sidecache_l2_up 1 (its probe tries a write when it took none; stream 68, refuse.go)"},
	{Name: "redis-restart", On: true, Gate: "restart-recover", Note: "Redis killed and restarted on its port in the middle of a round's traffic (at a drawn point among its requests, some sent during the outage; stream 38): once empty (SHUTDOWN NOSAVE), once from a snapshot SAVEd rounds before (acknowledged writes since then held to max-lag only: their raises are lost; those acknowledged during the outage held once the replay published them); replicas must serve again, no write undone past max_lag, on a replica started after the restart too"},
	{Name: "redis-stall", On: true, Note: "once a seed, in the middle of a round's traffic, Redis stalls 2.5 s or 4 s without going down (CLIENT PAUSE ALL, or its process stopped): the runner's own reads, batch read and write sent then are answered before Redis answers again (one Redis budget per request, write_hold), the write is held on its replica at once and on the other after max_lag (read there while the stall holds), replicas serve again (stream 44, stall.go)"},
	{Name: "promote-race", On: true, Note: "once a seed (stream 57), an L2 hit whose reply reaches its replica (a fourth, its Redis replies through a gate, subscribed directly) after it applied a peer's invalidation of it, its refetch failing: its L1 must not keep the pre-write copy, which it would serve once its tombstones lapse"},
	{Name: "list-refused", On: true, Note: "once a seed (stream 64), a split list of route u alone: one fresh good id among 39 the bulk endpoint always refuses with 400, too many for isolation to reach one alone within the list's budget: answered as the origin answers the list directly (its 400), never 502, within budget"},
	{Name: "batch-opener-budget", On: true, Note: "once a seed (stream 58), on the promote-race replica, a batch of route w (max_wait 3s) opened by a miss whose L2 read waited out redis.timeout (its Redis budget spent), joined by a miss whose budget is whole: the joiner's element must reach L2 as a one-id fill's would (stored with the opener's spent budget, it was dropped, its lease released with no fill)"},
	{Name: "ghost-lease", On: true, Note: "before some rounds (stream 37), the fill leases a replica that crashed while holding them would leave in Redis (its token, with what its last renewal left of the lease hold) for fresh plain and batched keys the round reads (alone and in split lists) and some of its own reads: answered right, within budget, never the sidecar's 504 nor held past the lease ttl + upstream.timeout"},
}

// Mix is the set of features a run draws from.
type Mix map[string]bool

// Has reports whether the feature is in the mix.
func (m Mix) Has(name string) bool { return m[name] }

// DefaultMix is the fixed seeds' mix: the rows that are On.
func DefaultMix() Mix {
	m := Mix{}
	for _, f := range Features {
		if f.On {
			m[f.Name] = true
		}
	}
	return m
}

// ParseMix reads the INVARIANT_FEATURES spelling: "" is the default mix,
// "all" every row, and a comma list adds ("+name" or "name") or removes
// ("-name") rows from the default ("all,-hangup" starts from every row).
// Unknown names are returned so the caller can fail loudly.
func ParseMix(s string) (Mix, []string) {
	m := DefaultMix()
	var unknown []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
		case w == "all":
			for _, f := range Features {
				m[f.Name] = true
			}
		case w == "default":
		default:
			on := !strings.HasPrefix(w, "-")
			name := strings.TrimLeft(w, "+-")
			if !slices.ContainsFunc(Features, func(f Feature) bool { return f.Name == name }) {
				unknown = append(unknown, name)
				continue
			}
			m[name] = on
		}
	}
	return m, unknown
}
