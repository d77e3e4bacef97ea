// Package invariant is the security model as a test: it drives randomized,
// concurrent request sequences through two real replicas (each with L1 and
// L2 on one real Redis, wired by internal/server, so pub/sub coherence,
// leases, batching and the large-body stream all run) in front of a
// scripted origin that misbehaves, and checks every answer against the
// invariants of the README's "Security model".
//
// # Identities
//
// Four clients, alice, bob, carol and dave, each connecting from its own
// loopback address (127.0.0.2-5), with its own cookie (sid=<name>), bearer
// token and tenant (X-Tenant acme, globex, initech, none); per request
// each picks an Accept-Encoding, an Accept-Language, whether to send its
// credentials, path spellings, query orders and GET or HEAD (a HEAD
// answer is checked by the stamp the origin also sends as X-Stamp). The
// origin (package origin) stamps every answer with the resource and version it
// answered for and with the value of every identity dimension the answer
// depends on, as it saw it; its behaviour per resource is redrawn every round (Vary sets,
// dependencies on a header other resources of the route Vary on that the
// answer does not name, private, Set-Cookie (or the obsolete Set-Cookie2), sizes either side of max_body_bytes, gzip, delays,
// 5xx, hang-ups, bodies broken off or stalled halfway, ETags, Last-Modified) and bulk calls with IDs it cannot
// parse fail. Route n's answers (freshness: origin, stale_if_error) vary,
// fail and often say max-age=0 (stale-if-error): stored copies are stale
// at once and served only when a refetch fails, and every one is held to
// the identity checks (Checked counts stale-if-error-<route>).
//
// # Split lists' stale ids and partial bulk answers (check/stale.go)
//
// Route s is a batch route with stale_if_error (freshness: origin,
// key.headers Accept-Language) and its split list; each round adds 0-5
// reads and lists of its ids 1-6 (traffic.StaleRequest, on a sequence of
// draws of their own, so the other rows' draws are unchanged). Its bulk
// endpoint's answers (split-stale) are stale at once, may Vary on
// Accept-Language, may be private (a list's ids answered for another
// request are fetched again on the list's own call) and fail 503 or hang
// up; with bulk-206 it may answer 206 with half the list. Every stale id
// served is held to the identity and resource checks (Checked counts
// split-stale-s and stale-if-error-s); no element of a 206 answer may
// reach a client (bulk-206); and a read or list from a client without
// Accept-Language whose every id it was seen to receive as a shareable
// element earlier must never fail, whichever call failed
// (stale-if-error); with evict-epochs only on the replica that received
// it, as on a Redis that has evicted a new tag's first fill is stored in
// L2 but reads as a miss there (check.Config.HeldLocal). Nor may one
// whose every id its replica held a copy of, confirmed through the
// admin GET /cache before it was sent and, the same entry, after it
// failed, wherever the copy came from (held.go: Checked counts
// held-at-send-s and held-inferred-s); neither when
// its replica could not read a stored entry while answering it: the
// coherence bound refused one (its proof of hearing invalidations older
// than max_lag, as when its heartbeats come back late on a loaded
// machine) or an L2 read failed, read off its /metrics around the
// request (held.go; Checked counts held-unreadable-s).
//
// # Conditionals (traffic/conditional.go, check/notmodified.go)
//
// Every 200 a client receives with a validator goes into one pool per
// resource (one for lists), whoever received it. A GET may then carry
// If-None-Match with tags of the client's own copies or of another
// identity's (private and per-identity answers included), weak or strong,
// in a list, over several field lines, or "*"; If-Modified-Since with the
// Last-Modified (else Date) of a copy of its own variant, or a date far
// off; or If-Unmodified-Since. A 304 tells the client to keep the copy its
// validator named (the one whose tag the 304's ETag matches), so that copy
// is held to every check below as if it were the answer, and the 304 must
// carry the ETag it matched, Date, and the Vary and Cache-Control of that
// tag's 200 (RFC 9110 §15.4.5; the origin's tags cover those fields). The
// pool changes what a request sends, never how many draws it takes, so a
// seed still fixes the sequence of draws.
//
// # HTTP edges (traffic/edges.go)
//
// Issue 21's edge inputs that can shape an answer on the cached path are
// drawn at low rates: the same header as two field lines (one empty, or
// another value: the origin reads one list, RFC 9110 §5.3), odd
// Accept-Encoding lists and qvalues, Range (the origin answers 206 to one
// range: a part must never reach a client that did not ask for one),
// absolute-form targets (RFC 9112 §3.2.2), percent-encoded path spellings
// the origin decodes (/r/%35 is /r/5 to it, as RFC 3986 §6.2.2.2 says) on
// reads and writes, and writes with a chunked body and trailers or behind
// Expect: 100-continue, a field the client's Connection names
// (X-Client-Hop: hop-by-hop, RFC 9110 §7.6.1), the request target * on
// reads and writes (asterisk-form, RFC 9112 §3.2.4: OPTIONS only, so the
// sidecar's own 400 and the connection closed, send.go), reads whose client
// half-closes once the request is written (send.go: sent nothing when
// the request had to wait, else a whole answer, checked as any other),
// and writes whose body stops halfway (trickle-write, send.go
// doTrickled; some behind Expect: 100-continue, once the 100 came), sent to a third replica like the others but with a
// read_timeout of 500 ms (a bound that short on the two would cut the
// other rows' slow answers), and read back through it, and writes whose
// 64 MiB body the origin never reads or whose chunk size is past 2^63
// (client-body, clientbody.go), and reads and lists saying Expect:
// 100-continue with no body (expect-read, on stream 35: the lean loop,
// the ReverseProxy way and the cached path's fills and bulk calls). The
// origin records every call that carries an Expect (the expect check).
// The report's Checked counts the answers each got,
// by status, so a run shows they reached the replicas.
//
// # User-Agent variants (vary-user-agent, draws.go drawAgents)
//
// Each round adds 0-3 reads of /a/{id} (route a: no key headers, nothing
// forwarded until an answer's Vary names it; traffic.AgentRequest, on
// stream 41, so the other draws are unchanged), GET or HEAD, with the
// identity's own User-Agent, one every identity sends, or an empty one
// (none on the wire). Every answer says Vary: User-Agent and is stamped
// with the User-Agent the origin saw ("" for none), so the identity
// check holds each client to the answer made for what it sent: a fetch
// that withheld User-Agent sent none (the sidecar's empty value keeps
// Go's own off the wire), and its answer, stored as the client's
// variant, would be the origin's answer to none.
//
// # Spelled ids and applied writes (respell.go)
//
// On a stream of its own (PCG stream 31 of the seed, traffic.Gen.lenient,
// so the other draws are unchanged), writes to /r/{id} are spelled the
// ways the origin reads as id (write-lenient-id: /r/%205, /r/5%20,
// /r/%095, as PostgreSQL's int4 input; /r/5-acme, /r/05-x, as Rails'
// find; and, on stream 39, traffic.Gen.multi, the spellings stacks read
// differently or only some read as a number: /r/0x5, /r/0o5, /r/0b101,
// /r/0_5, a full-width 5, NBSP, U+FEFF or U+3000 around it, which the
// origin reads as PostgreSQL 16+ and Python's int() do, /r/0.5e1,
// /r/50e-1, /r/500E-2, as JavaScript's Number does, and /r/50e-1-x, as
// PHP's (int) does (5; Rails' find reads 50), and which
// route-tagged-read reads through too: not stored), and answered by the origin, once applied, 303 See Other, 502 or
// 504 with its stamp (write-applied-other: the answer=N instruction, held
// as acknowledged). Reads of /r/{id}/summary (route r-summary, tagged
// r:{id} under another URI: only the write route's tags reach it; a purge
// by key of /r/{id} does not, so it holds no summary read) join the
// round's (route-tagged-read), and each such write reads the summary
// through its replica before and after it (tagged-warm-, tagged-read-):
// a copy the write left, however it spelled the id or whatever of those
// codes answered it, is an own-write violation. On stream 47
// (traffic.Gen.override, write-method-override) a write's method is
// spelled as frameworks read an override (traffic.Overrides): a POST with
// X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override or
// X_HTTP_Method_Override, a POST with _method in its query or form body;
// the origin applies each as PATCH (origin.AppliedMethod), and its
// summary is read before and after it the same way. A lower-case patch
// is drawn too, and must be the sidecar's 400, unsent (methodcase.go).
//
// # Methods in another case (read-method-case, methodcase.go)
//
// On stream 53 (traffic.Gen.methodCase), about one read or list in
// twenty-five is spelled with a case variant of its GET or HEAD (get,
// Get, gET, head, …) on a connection of its own: the sidecar must answer
// its own 400 (detail=method-case), and the origin, which folds case as
// Werkzeug does, records every call whose method holds a lower-case
// letter (Origin.TakeMethodCases): any is a violation (method-case).
// Forwarded as the write it is to the sidecar, such a read dropped its
// URI on every replica once the origin answered 200.
//
// # Writes to list endpoints (draws.go drawListWrites, traffic/listwrite.go)
//
// In about one round in four (write-list, on PCG stream 50, so the other
// draws are unchanged) a PATCH of a list endpoint names up to five of ids
// 1-8: /u?ids=… (route u's split list, also its batch's bulk path) or
// /e?ids=… (route e's bulk path alone, beside its write route e-write),
// the ids spelled as list endpoints read them (commas, the parameter
// repeated, ids[], a blank before an id). The origin applies it to each
// id and answers one stamp per id (origin/bulk.go writeList); each is
// acknowledged as a write of that id's own path (check/listwrite.go), so
// every later read of the id, alone or as an element of a split list of
// route u (list elements are held to acknowledged writes as reads are),
// is held to it: own-write through its replica, max-lag through the
// other. Checked counts write-list and write-list-ids.
//
// # Admin purges (purge.go)
//
// In about three rounds in ten (purge), the runner picks a resource one of
// the round's reads asks for on route r or h, waits until a GET of it has
// taken its version at the origin (a fill in flight, held by the slow
// answers), changes it behind the cache (origin.Bump: no write reaches a
// replica) and sends POST /purge?key=GET <host>/<res> (or ?tag=r:<id>) to a
// replica's admin API. The purge's 200 is held as a write acknowledged
// through that replica, so the version checks require every later read
// there, and every read through the peer after max_lag, to have the new
// version; once the round is over the draw's read is sent again through
// the purging replica (purge-read-<status>), so a fill that stored its
// pre-purge answer in L1 or L2 shows as an own-write violation. A purge
// answered 500 (Redis did not confirm it in time) is not acknowledged and
// holds nothing (purge-500); any other answer but 200 is a purge violation.
//
// # Upgrades (upgrade.go, origin/upgrade.go)
//
// The replicas allow websocket upgrades (max_tunnels 2,
// tunnel_idle_timeout 250ms). After about one round in seven (upgrade),
// a stage sends upgrade requests through one replica, each on a
// connection of its own, half the time after holding max_tunnels echo
// tunnels open, to an origin endpoint that echoes a tunnel's own lines,
// switches unasked, refuses with a 200, closes at once, hangs up or
// stays silent; with forged X-Forwarded-*, Forwarded, X-Real-Ip,
// True-Client-Ip and underscore spellings, to /ws (no route) or to route r (bypassed by a cookie, or
// the cached path), with cached reads of /r before them on the same
// connection and after them when not switched. A tunnel's lines come
// back to it alone (tunnel-cross); no 101 reaches a request that asked
// no allowed upgrade (upgrade); the tunnels echoing at once are at most
// max_tunnels, a 503 has Retry-After and its request never reached the
// origin (tunnel-limit); a silent tunnel is closed on both sides and
// counted in edge_refused{reason="tunnel-idle"} (tunnel-idle); no
// forged forwarding value reaches the origin (upgrade-forged); and each
// /r the stage touched, read back through every replica, is checked as
// any read (nothing of a tunnel stored).
//
// # The connection cap (conncap.go)
//
// With conn-cap (On; stream 52) the environment starts one more replica,
// a peer of the others, with server.max_connections 4. After about one
// round in five a stage fills its cap with idle keep-alive connections
// (each answered one read of /r), then sends it a write of /r/<id> and
// reads of it, each on a new connection: each must be answered within
// 10 s though every slot was idle-held (the oldest idle is closed for
// it), its answer checked as any (the write is acknowledged through that
// replica, so later reads are held to own-write and max-lag), and
// sidecache_client_connections_reaped_total must grow once per new
// connection (conn-cap). Then it holds the cap with requests cut
// mid-header: the listener must wait (client_connection_waits_total), and
// one more read is answered once the held ones are completed. Without the
// reaping, a new client waits for an idle connection's idle_timeout
// (120 s): a conn-cap violation, never a hung run.
//
// # The send budget (sendbudget.go)
//
// With send-budget (On; stream 65, its draws on 66) the environment
// starts one more replica, a peer of the others, with
// server.max_pending_send_bytes 1: no two writes of different answers may
// wait on full client sockets at once. After about one round in ten a
// stage opens 3 or 4 clients that never read (4 KiB receive buffers, each
// from an identity's address), one after the other, each pipelining reads
// of two /r resources of its own (ids from 70000, answered just under
// max_body_bytes) until the replica's write to it waits. Then k-1 of them
// must have been cut (sidecache_edge_refused_total{reason="send-budget"})
// and one write be waiting (sidecache_client_pending_sends); the cut ones'
// answers end short, the last one's all come whole; every answer read
// whole is checked as any, and a client that reads then gets each of the
// stage's resources whole and right (send-budget). Without the budget all
// k writes wait until write_timeout, none cut: a send-budget violation.
//
// # The header budget (headerbudget.go)
//
// With header-budget (On; stream 73) the same replica has
// server.max_pending_header_bytes 16 KiB. After about one round in ten a
// stage opens 3 or 4 clients, one after the other, each from an
// identity's address, each sending 6-7 KiB of a GET /r header section
// (ids from 76000) and stalling in it. After each, the replica must hold
// exactly the sections the model keeps (sidecache_client_pending_header_bytes)
// and have cut the others (sidecache_edge_refused_total{reason=
// "header-budget"}): over the budget the largest other section is cut,
// among equals the earlier, the growing one never; an ordinary read sent
// at once beside them is answered and checked as any. Each cut client
// must then read a 431 and the end of its stream, and each kept one,
// once it ends its section, a 200 (header-budget). Without the budget
// nothing is held or cut: a header-budget violation.
//
// # One read's calls (mismatch.go)
//
// With mismatch-vary (On; stream 59), after about one round in four and
// twice a run at most, one replica reads a resource of route n of its own
// twice, with a field of its own set: the origin's 304 to the second
// read's conditional call names another ETag than the stored one, and the
// unconditional answer after it varies on that field, which the call did
// not carry. The origin records the calls by resource, so each read's
// calls are checked on their own against the read budget of 2
// (budget-request): the round's budget hides one extra call. The read must
// answer its own variant, the stored one (stale_if_error) or a 502/504.
//
// # Answers that stall after their header (stalled.go)
//
// With stalled-length (On; stream 61), after about one round in four and
// three times a run at most, an identity sends one replica a pass-through
// request for a resource of the row's own (origin.StalledPath, on no
// route), on a connection of its own: a GET (the lean loop), then a PATCH
// (ReverseProxy), then either. The origin answers 200 with a
// Content-Length, sends its header and 0, 8 or 1000 bytes of the body,
// and holds the rest until the runner releases it. While it holds, the
// client must read the status line and those bytes (an order: the origin
// is released only once the client has them); then the origin closes
// short, and the client must see the body broken, never whole. Counts
// stalled-length-<method>-<sent>, and stalled-length-late when the bytes
// reached the client only after the sidecar had cut the call.
//
// # Wide purges (purgeall.go)
//
// In about three rounds in twenty (purge-all, purge-route; their own
// sequence, PCG stream 27), POST /purge?all=1 or ?route=NAME (a route
// one of the round's reads asks for: r, p, n, t, k or h) goes to a
// random replica, most of the time once a fill of one of the round's
// reads has taken its version at the origin (in flight across the
// purge), else after a short delay of its own. First every resource the
// purge covers (ids 1-4 of those routes, /t's two names) is changed
// behind the cache (origin.Bump), so a body made before the purge began
// is older than every one made after; the purge's 200 then holds every
// later read of each as a write acknowledged through the purging replica
// (own-write there, max-lag on the peers): no copy made before the purge
// is served after its answer, a fill in flight across it included. The
// round's read is sent again through the purging replica once the round
// is over (purge-all-read-<status>). A purge of everything drops route
// s's stale-if-error copies too: none counts as held across it
// (check/drop.go). A 500 holds nothing (purge-all-500).
//
// # Redis restarts (restart.go)
//
// With redis-restart (On), the replicas' Redis is restarted twice a seed
// (runs of 40 rounds or more), each time in the middle of a round's
// traffic: of its n requests the first k (drawn, stream 38) go at once
// and Redis goes down once j of their answers came (the rest are in
// flight across it), the last n-k go while it is down, and it comes back
// once they are answered. In the first ordinary round from 3/8 of the
// rounds it is shut down without saving and started empty on its port;
// at 5/8, between rounds, a resource no round reads (/r/9) is read
// through both replicas, Redis SAVEs and /r/9 is written through replica
// 0; in the first ordinary round from 3/4 Redis is killed and started
// from that snapshot, which brings back /r/9's pre-write entry and the
// epochs as they were. The writes acknowledged since the SAVE are held
// to max-lag only (docs/coherence.md, "When Redis loses epochs": the
// floor refuses an entry fetched before the restart once it is older
// than max_lag; the writer's own replica is not promised more), and
// those acknowledged from the moment Redis goes down until every replica
// has published what it replays are held from then on, to max-lag only
// (an answer that went out at write_hold has its bound counted from the
// replay's publish). A
// replica started after the snapshot restart, then the two, read /r/9
// once max_lag (plus margin) has passed since its write: the pre-write
// version is a max-lag violation (the new replica finds the floor in
// Redis's note, internal/cache/l2/restart.go). After each restart every
// replica's /readyz must say l2 up and coherence proven, and its
// replayed invalidations be published, within 20 s, and its read of the
// probe after the round answer 200 (redis-recover); route s's held
// copies are forgotten across it. On an evicting Redis (evict-epochs)
// the new instance is made to evict a few keys again, since the row's
// deletions are evictions only on a Redis that has evicted.
//
// # Redis out of memory (oom.go)
//
// With redis-oom (On), for 3-6 rounds from about half the rounds (stream
// 42; runs of 40 rounds or more) the replicas' Redis is over maxmemory
// under noeviction: it refuses stores, leases and plain scripts' SETs and
// still answers reads, PUBLISH and deletes. Before it, /r/7 (no round
// reads it) is read through both replicas so L2 holds it; then it is
// written through replica 0 (a 200 is due). At the stretch's end, once
// max_lag (plus margin) has passed since that write, a replica started
// then, and the two, read /r/7: the pre-write version is a max-lag
// violation (on f93bcf7 the epoch raise was refused, the replay gave it
// up and L2 served it until its TTL); the replica started then reads once
// its /readyz says coherence proven, with l2 up or degraded for "writes
// refused" (OOM refuses its probe's write too: oom-started-l2-<state>).
// Then the memory comes back and every
// replica's /readyz must say l2 up and coherence proven within 20 s, and
// its read of /r/7 answer 200 (redis-recover). The stretch ends early
// before a crowd or queue round.
//
// # Redis refusing writes (refuse.go)
//
// With redis-refuses-writes (On), once a seed after a round drawn from a
// fifth of the rounds on (stream 48; runs of 40 rounds or more), between
// rounds, the replicas' Redis refuses every write while it answers
// (min-replicas-to-write 1 with no replica: NOREPLICAS, as a failed
// snapshot's MISCONF): epoch raises and the note's raise are refused,
// heartbeats and PUBLISH go through. /r/6 (no round reads it) is read
// through both replicas so L2 holds it, then written through replica 0
// (a 200 is due). Past the replay's tries (5 × max_lag after that
// answer) Redis takes writes again, and a replica started then, and the
// two, read /r/6 once their /readyz says l2 up and coherence proven
// (redis-recover): the pre-write version is a max-lag violation (the
// replay gave the tag up as one Redis refused, nothing raised it later,
// and the new replica adopted the note's old floor).
//
// With readyz-refused-idle (stream 68, refuse.go), once Redis refuses
// writes and before replica 0's write, a replica drawn among the others,
// which has sent Redis no write since, must say so within recoverWithin:
// /readyz 200, l2 degraded, reason "writes refused", then
// sidecache_l2_writes_refused 1 beside sidecache_l2_up 1 on its
// /metrics (readyz-refused-idle). It said "up": only a refused write of
// its own told a replica (its probe now tries a write when it took none
// within its interval). Checked counts readyz-refused-idle.
//
// # Config reloads (reload.go, shadow.go)
//
// The two replicas run from config files of their own (env_test.go), so
// the reload-torn row (stream 43) can reload one between rounds: first
// with the file cut just before r-write's invalidate line (a half-written
// file applied: the rule and every later route missing), under which an
// /r/{id} write goes through it after its /r/{id}/summary was stored, then
// with the whole file. The write was acknowledged, so the summary read
// back through that replica, and every later read, is held to it: the
// whole file's reload must drop what the rule it regains may reach. The
// row's steps answer with the plain profile (the round's may keep the
// summary from being stored, or refuse the write), and the summary is
// read until the replica's admin GET /cache shows it stored (fillStored:
// an order read off the replica, not a sleep), the next id tried when
// an earlier answer too large put it under hit-for-pass; Checked counts
// reload-torn-stored, reload-torn-pass (fills passed through) and
// reload-torn-unstored (fills never seen stored). With
// bulk-vary-withheld (odd seeds) each reload also tests that route s keeps
// the X-Tenant it learned, and that a bulk call in flight across its
// learning is judged by what it sent (reload.go).
//
// Once a seed the reload-shadow row (stream 45, shadow.go) reloads a
// replica (sometimes both) with a route inserted before r-write that takes
// its PATCHes of /r/{id} and invalidates nothing, then with the whole file
// again: a rule a route before it shadowed is regained when that route
// goes (internal/server's retire.go). Around each change /r/95/summary is
// read (stored on both replicas first) and /r/95 written through the
// reloaded replica; the write answered under the shadow drops only its
// URI, so once the whole file is back the summary read through that
// replica is held to it at once (own-write), and through the other once
// max_lag (plus margin) has passed (max-lag). With cache.tag_headers on
// (the default) the regained rule may reach any entry, so the whole
// file's reload drops every cacheable route's, route s's held copies
// too: both reload rows are drops to its stale-if-error check
// (check.StartDrop). Checked counts reload-shadow and
// reload-shadow-stored.
//
// Once a seed the secret-token row (stream 70, secrettoken.go) reloads a
// replica with admin.token written as the documented
// token: "${SIDECACHE_ADMIN_TOKEN:-}" expands a Kubernetes Secret made
// from a file: its final newline inside the quotes, which YAML folds into
// a trailing space. Through that replica a purge of the row's own tag and
// an inspect of /r/96/summary, with the token as the operator holds it,
// must answer 200 (a purge's 500, Redis slow to confirm it, is counted
// as secret-token-500): the configured token is read without surrounding
// blanks, as the presented one is. Then the whole file comes back; no
// route changes, so nothing is dropped. Checked counts secret-token.
//
// Once a seed the batch-reload row (stream 67, batchreload.go) reloads a
// replica's unchanged file while a bulk call of route q (batch max_size
// 2, max_in_flight 1) is held at the origin (origin.HoldQueue), then
// reads another fresh id of q through it, with the same headers (one
// batch group): the replica keeps the route's batcher across the reload
// (internal/proxy's keptBatching), so the second id waits behind the
// held call. A second /q call at the origin before the first is
// released (looked for for batchReloadLook) is a batch-reload violation:
// two calls of one group at once under max_in_flight 1, as when each
// reload made every batcher anew (and forgot each group's quarantine).
// Checked counts batch-reload and the reads' batch-reload-<status>.
// Its write stage (write-reload, on the same stream) then holds a write
// of /r/97 at the origin before it is applied (origin.HoldWrite) while
// the replica applies its file torn and then whole, so the reload
// regains r-write's rule with the write in flight; the summary is read
// and stored at the version before the write, the write let through, and
// the summary read back is held to it (own-write): a write answered
// after a reload drops what the table in force invalidates for it too
// (internal/proxy's writeInv.reloaded). Checked counts write-reload and
// write-reload-stored.
//
// # Redis stalls (stall.go, mid.go)
//
// Once a seed (stream 44; runs of 40 rounds or more), in the middle of
// an ordinary round's traffic from a round drawn between 1/8 and 3/8 of
// the run (split as the restart row's, mid.go), the replicas' Redis
// stalls without going down, for 2.5 s or 4 s (drawn): CLIENT PAUSE
// ALL, or its process stopped (SIGSTOP) and continued. Once the stall
// has begun, the round's held requests go, and through one replica the
// runner's own: a read of /r/91 (held in L1), of /r/92 (a miss), a
// one-id read of /u/47001 (batched) and a write of /r/93 (stored on
// both replicas before). Those four must be answered before Redis
// answers again (redis-stall: a request's Redis calls share one budget
// of l2.redis.timeout, and a write waits at most coherence.write_hold
// for its invalidation; 2.5 s is twice that, and short of
// upstream.timeout, which bounds a write's invalidation as a whole).
// Writes acknowledged during the stall hold their own replica's reads
// at once (the writer's L1 and tombstones) and the others' from when
// every replica has published what it replays, to max-lag (check's
// StartStall); the runner's write, as the README's "Redis paused" row
// says, is held to max-lag from its answer: while the stall holds,
// max_lag (plus margin) after it, the other replica reads /r/93 (its
// copy older than max_lag, its proof stalled: the 4 s stall), and its
// own replica reads it once Redis answers (L2 still holds the copy
// under the epoch the stalled raise could not move). Then every
// replica's /readyz must say l2 up and coherence proven within 20 s
// (redis-recover). Checked counts redis-stall-<pause or
// freeze>-<length>, redis-stall-bounded, redis-stall-peer-read (the 4 s
// stall; -peer-late when the stall is short or the write came too late
// for it) and redis-stall-deferred.
//
// # Crashed lease holders (ghost.go)
//
// With ghost-lease (On; stream 37), before about one ordinary round in
// six the harness writes into Redis the fill leases a replica that
// crashed while holding them would leave (its token under the lease key,
// living what its last renewal left of the lease hold, SET NX): for a
// fresh plain resource of route r and fresh ids of batch route u that
// the round reads through one or more replicas (one-id reads, sometimes
// a split list of them too), and for a third of the round's own reads
// and lists whose key the admin GET /cache names. Their answers are
// checked as any other, the round's calls against its budget, and: a
// read whose lease a crashed holder left is never the sidecar's own 504
// (ghost-lease: the dead lease was waited on rather than taken over),
// nor still unanswered at the lease's ttl plus upstream.timeout (held).
// Checked counts the leases written and the replicas' takeovers.
//
// # Replies that arrive late (promote.go, openerbudget.go)
//
// The env runs a fourth replica whose Redis commands and replies pass
// through a gate (redistest.Gate) and whose subscription goes to Redis
// directly. Once a seed, the promote-race row (stream 57) holds the reply
// of its L2 read of /r/87, which L2 holds, while a write through another
// replica raises the tag and the gated replica applies the published
// invalidation; the origin fails the read's refetch. Its L1 must then hold
// no entry requested before the write (promote-race): the L2 hit copied
// into L1 after the invalidation would be served as fresh once the
// tombstones lapse. Once a seed, the batch-opener-budget row (stream 58)
// holds only the connection that reads /w/x until the read times out
// (its Redis budget spent), so /w/x opens a batch of route w (max_wait
// 3 s), which /w/y, read with a whole budget, joins: y's element must
// reach L2 (batch-opener-budget).
//
// # A list the upstream refuses (listrefused.go)
//
// Once a seed, between rounds, the list-refused row (stream 64) sends one
// split list of route u alone: a fresh good id among 39 ids the bulk
// endpoint always refuses with 400 (origin.RefusedID). Its budget (13
// bulk calls) runs out long before isolation halves its way to one id
// alone, and each call refused was the upstream's answer to a part of
// this list's own ids with its headers: the list must be answered as the
// origin answers it directly, 400 "bad id …", never 502 (list-refused),
// within traffic.BudgetList calls (budget).
//
// # A deploy that changes a route's tags (retag.go)
//
// Keys do not name the route, and an entry's tags are fixed when it is
// stored, so pods started from a changed config read what the old pods
// stored in L2. Once a seed, the restart-retag row (stream 46) reads
// /r/61/summary through one of the replicas, starts a replica from the
// replicas' config with r-summary renamed r-digest and tagged rsum:{id}
// (r-write invalidating that instead of r:{id}), writes /r/61 through it
// and reads the summary back through it: held to the write (own-write),
// so the old copy, which none of the new config's tags reach, must be a
// miss. Only the new replica reads it after the write (retag.go says why).
//
// # Trailers (origin/trailers.go, check/trailers.go)
//
// On a drawn share of its answers (reads, their 5xx, writes, bulk answers
// and bulk failures) the origin sends the body chunked and ends it with
// trailers: X-Trail, naming the call (X-Trail-Call in the header), the
// resource or bulk ids, every identity dimension as the origin saw it and
// the X-Request-Id; and names that must never be relayed as trailers
// (RFC 9110 §6.5.1, hop-by-hop fields, the tag headers), valued
// trl-<address>. All are announced in the Trailer field, only X-Trail, or
// none. The report's Checked counts trailer-sent-<path> (the header says
// the upstream answer had them) and trailer-got-<path> (the client got
// X-Trail), by Cache-Status: bypass and method (the lean loop and
// ReverseProxy), too-large (the large-body stream), hit, miss, collapsed,
// batch.
//
// # Crowd rounds (crowd.go)
//
// Every 22nd round (list-crowd) is a crowd round instead: 60 split-list
// requests of 12-24 ids and 20 one-id reads at once, from every identity
// through both replicas, over 48 ids no other round uses (so they load
// through the batcher, not the cache), while the bulk endpoint is slow
// (10-50 ms) but healthy: no bad id, no failure. The ids of one list
// then sit in several pending batches, which the ordinary rounds' few
// requests never cause: make bench's 200 concurrent lists found a list
// charged each batch it joined, and good lists answered 502. Every
// answer must be a 200 (collateral, below). list-crowd-large
// (INVARIANT_FEATURES=all, and the soak) makes it every 8th round, 200
// lists over 96 ids and 50 one-id reads. With list-crowd-bad, every
// other crowd round one list in twenty carries a bad id of its own: that
// list may fail, no other may. With list-crowd-hangup, one list in eight
// hangs up once its request is written: the batches only it waited on are
// dropped unsent, and every other answer must still be a 200. But for a
// timeout's: on a loaded machine a bulk call can outlast upstream.timeout
// however healthy its origin, and its ids' 504 is then the documented
// answer, accepted when it came upstream.timeout or more after the round
// began (check: crowdTimeout); a 502 never is.
//
// A crowd round's bulk calls are told by their ids (CrowdRound) and
// counted against its budget whenever they arrive: a batch it queued may
// be sent after its last answer (a list's retry whose ids other lists'
// retries answered first still goes), during the next round, whose few
// requests' budget it is not.
//
// # Queue rounds (queue.go, check/queue.go)
//
// Beside round 30 and every 80th after (list-crowd-queue), a queue
// round drives route q, whose batch (max_size 2, max_in_flight 1) bounds
// its queue at 28 ids: one list of 40 fresh ids per replica holds the queue past the
// bound, and once each replica's first bulk call came, 24 lists and 16
// one-id reads of fresh ids go at once. Every answer must be a 200
// (checked as any other), a 503 with Retry-After or a 504 (queue); on
// each replica at least one one-id read must answer 200 (queue-fair: lists
// may hold ¾ of the queue, the one-id misses jump their batches); and
// sidecache_batch_dropped_total, read from each replica's /metrics before
// and after, must grow by the ids of the 503s its clients saw, and its
// deadline count only with 504s (queue-metric).
//
// # Retry rounds (retry.go)
//
// Beside round 40 and every 80th after (list-crowd-retry, PCG stream 69),
// a retry round drives route q with its bulk endpoint held: per replica,
// one list of two fresh ids takes the group's one call, then 24 lists of
// the same two ids, a bad one and a good one, join one batch; let go, that
// batch's call fails and is retried for the lists. Once each replica's
// first retry came, four one-id reads of fresh good ids go per replica:
// each must answer 200 (or 504, its deadline), never 503 (queue-retry):
// lists' retries are the lists' ids, and may not take the quarter of the
// queue kept for one-id misses. Counted as the misses', they had a read
// of a good id refused 503 "upstream busy" in the all-features soak's
// crowd round (seed 1000). And the retries must keep the queue's bound
// (queue-retry-bound): one retry per list would queue 48 ids in a group
// bounded at 28, so the failed call's ids are retried once each
// (internal/batch classesLocked); the origin counts the /q calls that
// held each replica's bad id, at most 4 (the shared call and its
// halving, twice over for lists late enough to open a batch of their
// own). One retry per list sent it 26 and 49 times (seed 1).
//
// # Invariants (package check)
//
//   - identity: never another identity's per-address, per-credential,
//     per-tenant or per-language answer, nor a Set-Cookie minted for
//     another address (private-stray, PCG stream 55, run.strayPrivate:
//     half the private answers say so with other separators than commas,
//     origin.StrayPrivate; vary-malformed, PCG stream 56: a Vary
//     joined by a blank or ';', origin.Profile.VarySep; and
//     targeted-nostore, PCG stream 60, run.targetedNoStore: a third of
//     the private answers left say max-age=60 with no-store in a
//     Surrogate-Control or CDN-Cache-Control, origin.TargetedNoStore);
//   - bulk-set-cookie: an element of a bulk answer that set a cookie
//     (PCG stream 63, run.bulkCookie: a third of the bulk-per-address
//     answers mint one for the caller's address, origin.Stamp.Cookie)
//     comes with that cookie, to a one-id read and in a split list alike:
//     the answer is private to the request whose call it was, which would
//     have had the cookie from the upstream directly;
//   - bulk-echo-spelling (reported as collateral or list-as-asked): one
//     round in four (PCG stream 63, after bulk-set-cookie's draw), the
//     bulk endpoint names the elements of ids 5, 10, … 60 with a leading
//     zero (origin.Profile.EchoPadded): such an id is no absent one, so a
//     one-id read of it is the origin's answer, never a 404, and a list
//     holding it lists it (the origin's own list), never leaves it out;
//   - bulk-bom (reported as collateral): one round in five (PCG stream
//     63, after bulk-echo-spelling's draw), the bulk endpoint starts its
//     arrays with a UTF-8 byte order mark (origin.Profile.BOM): the same
//     array (RFC 8259 §8.1), so a good id is never answered 502;
//   - bulk-null (reported as bulk-null, collateral or list-as-asked):
//     two rounds in six (PCG stream 72, nulls.go), the bulk endpoint of
//     route u writes null in the place of an id it does not have
//     (origin.AbsentID, 70-77: 404 called directly; Profile.NullAbsent),
//     as a DataLoader batch function does (it leaves them out in every
//     other round). Those rounds and one more in six read absent and
//     good ids on one replica (so they share its batches) and list both:
//     an absent id's read is 404 (a null is no element, read as an
//     omitted id is), never 502; a good id's 200 and the list its good
//     ids as asked, within the round's budget;
//   - resource, query, unkeyed: the answer is for the resource and query
//     this request names as the origin parses them, and never shaped by
//     another request's unkeyed input (an echoed X-Request-Id);
//   - own-write: never a version older than a write acknowledged through
//     the same replica before the read was sent;
//   - max-lag: never a version older than a write acknowledged through any
//     replica more than coherence.max_lag (+ half of it as margin) before
//     the read was sent — orderings on one clock, never a timing bound on
//     the sidecar;
//   - coding: never a Content-Encoding the request did not accept (no
//     Accept-Encoding accepts identity only), its field lines read as one
//     list (check.Coding: coding-lines answers say identity, then gzip),
//     nor a stored identity body a 304 relabelled (304-coding: garbled);
//   - withheld-field: an answer's X-Secret, which a qualified private or
//     no-cache names (drawn with coding-lines and 304-coding on PCG
//     stream 40, run.drawFields), holds this client's own address only
//     (reported as identity);
//   - budget: the upstream calls of a round of concurrent requests stay
//     within the sum of their budgets (traffic.BudgetRead, BudgetWrite,
//     BudgetList: 2 + 2·⌈log2 n⌉ for n IDs), resends apart (see
//     traffic.BudgetRead); a crowd round's are checked once the run is
//     over; a round in which a client left before its answer (a
//     half-close while its request waited) ends once the origin is idle,
//     since that request's fetch goes on without it and is the round's
//     (play.go, settle);
//   - expect: no upstream call carries a client's Expect: the sidecar
//     answers 100-continue itself, as NGINX does, and sends the body at
//     once;
//   - connection-hop: no upstream call (per-ID fetch, bulk call,
//     pass-through, write) carries a field the client's Connection named;
//   - upstream-lie: no answer the origin made against HTTP (a 304 to a
//     request with no condition, a 200 framed by both Content-Length and
//     Transfer-Encoding; origin.LieHeader) reaches a client, relayed or
//     stored: each is a 502;
//   - underscore-forwarding: no upstream call carries an underscore
//     spelling (X_Forwarded_For, X-Forwarded_Host, X_Real_Ip, X_Tenant)
//     of a field the sidecar writes or keys on, which a CGI-style
//     upstream reads as that field, nor a client's X-Real-Ip or
//     True-Client-Ip (origin.ForgedAddress);
//   - resend: no upstream request (one X-Request-Id) reaches the origin
//     more than MaxSends times: once, and once more after a hang-up on a
//     reused connection (RFC 9112 §9.3.1);
//   - collateral: a per-ID read of an ID the origin parses, and a list
//     whose IDs it all parses, never fails (200, 206 or 304 only) because
//     a bad ID of another request shared its bulk call, nor because other
//     requests' ids shared its batches (crowd rounds); a list with bad
//     IDs of its own may fail as documented (the bulk call's 400/500);
//   - trailers: no forbidden trailer name announced or relayed, nor a
//     trailer merged into the header; no trailer on an answer from a
//     store or another request's fetch (hit, stale, collapsed); a relayed
//     X-Trail is this answer's call's, for this resource (or ids of this
//     list), with no identity value or X-Request-Id but this request's;
//   - list-as-asked: a 200 answer to a list of ids the origin parses
//     lists one element per id asked, in order, as the origin reads them
//     (05 is 5; a repeated id each time, as the origin answers), whether
//     the sidecar assembled it per id or passed it through. The u and s
//     lists are drawn with distinct ids, and a quarter of them (drawn on
//     a sequence of their own, PCG stream 30: list-as-asked) then name
//     one twice or spell one 05: the sidecar cannot know whether its
//     upstream lists a repeated id once or each time, nor stores 05, so
//     those pass through whole, and store nothing (no stale-if-error
//     copy is held for them);
//   - list-bound: a list the sidecar reassembled (Cache-Status detail
//     "split …") is never over max_body_bytes, the most it buffers of
//     one answer: a longer one passes through to the origin's list
//     (bulk-big: records that fit alone, several together over it);
//   - bulk-206, stale-if-error: route s (above);
//   - queue, queue-fair, queue-metric: queue rounds (above);
//   - cache-status: every answer's Cache-Status ttl (RFC 9211 §2.4, the
//     freshness left) is an integer, only on a hit or a stored copy
//     served; a copy served stale (fwd=stale but a 304's) has ttl < 0, a
//     hit ttl ≥ 0, and where the harness knows the copy's freshness
//     lifetime (5 min on the route-mode routes, max-age on n and s),
//     ttl + Age is that lifetime within a second (check/cachestatus.go);
//   - continue: at most one 100 Continue reaches a client per request
//     (net/http's own, behind Expect), and a final answer follows it,
//     while the origin sends one or two 100s of its own before some
//     answers to writes and reads (origin-continue: they answer the
//     sidecar's request, never the client's);
//   - trickle: a write whose body stopped halfway, which the origin
//     applied as its header came, is answered 408 and closed, never a
//     success (net/http's implicit empty 200), and is held as a write
//     acknowledged through the trickle replica: its read back there
//     (own-write: that replica's L1 is empty, so a copy left in L2
//     shows) and every read through the others after max_lag (max-lag);
//   - client-body: a write whose body the origin never reads is answered
//     504 and closed once upstream.timeout passed without progress, never
//     held; one whose chunked body is malformed, 400 and closed, never a
//     502 (the failure is the client's);
//   - obs-fold: a request with a header line folded onto the one before
//     it (RFC 9112 §5.2) is answered the sidecar's 400 and closed, never
//     forwarded as net/http joined it (stream 34 draws it), also after
//     empty lines and an oddly framed request on its connection, which
//     is answered the sidecar's own 200 (obs-fold-lead, stream 36);
//   - asterisk-form: a request with the target * (not OPTIONS) is
//     answered the sidecar's 400 and closed, never the origin's answer to
//     a path the client never sent; the OPTIONS * sent before it on the
//     same connection, the sidecar's own 200 with Allow, the connection
//     kept;
//   - purge-all, purge-route: a wide purge is answered 200 (or 500,
//     holding nothing); what it holds is the version checks' (above);
//   - redis-recover: after a Redis restart, or once Redis over maxmemory
//     has memory again, every replica serves from it again (/readyz l2
//     up, coherence proven), publishes what it replays, and answers a
//     plain read; after a Redis stall, serves from it and publishes;
//   - stalled-length: the status line and the bytes an answer of known
//     length brought reach the client while its upstream holds the rest
//     (stalled.go), on the lean loop and ReverseProxy alike;
//   - redis-stall: a read, batched read or write sent while Redis stalls
//     is answered before Redis answers again (stall.go);
//   - ghost-lease, held: a read whose key's lease a crashed holder left
//     is taken over, never answered the sidecar's 504 nor held past the
//     lease's ttl plus upstream.timeout (ghost.go);
//   - bound: after the run, no Redis key is longer than max_key_bytes
//     (plus 256 bytes of the sidecar's own prefix and suffixes).
//
// # Packages
//
// Each part reads alone, and imports run one way. mix (the table of
// inputs) and origin (the scripted upstream and its wire format) import
// nothing of the harness; traffic (the identities and the draws of their
// requests) imports both; check (every answer held to the invariants
// below, and the report's violations and counts) imports origin and
// traffic; invariant (this package: rounds, their budgets, sending, the
// report) imports them all. Nothing imports back. The tests (env_test.go)
// start Redis, the origin and the replicas, and call Run.
//
// # Running it
//
//	go test ./internal/invariant                       # fixed seeds (make test)
//	INVARIANT_FEATURES=all go test ./internal/invariant # every feature, gated ones too
//	go test -run - -fuzz FuzzInvariants -fuzztime 5m -parallel 1 ./internal/invariant
//	make soak-invariants DURATION=10m                  # seed after seed
//
// INVARIANT_FEATURES is "all", or a comma list that adds (name, +name) or
// removes (-name) rows of the table from the default mix: "+vary-xff",
// "all,-hangup". INVARIANT_LOG=1 writes the replicas' warnings (each
// 502 and 504 with its cause: "upstream failed") to standard error, to
// tell a violation's cause.
//
// # Adding an input
//
// mix.Features (mix/mix.go) is the one table of the mix: one row per request
// feature or origin behaviour, with a one-line note. To add one: add its
// row (On: true when the sidecar already holds the invariants with it; else
// On: false and Gate naming the issue item that fixes it, e.g. "20.2", or
// Heavy when only the fixed seeds' wall time keeps it off),
// draw it in package traffic (Gen.Draw / drawHeaders / drawQuery) or in
// draws.go (drawProfile) and package origin behind `Mix.Has("name")`, and add a
// check in package check if no existing one would see it break. A route setting
// the feature needs goes into a new route of replicaConfig (env_test.go),
// never into an existing route. Whoever fixes a gated item flips its row
// to On in the same change.
package invariant
