// Package conformance holds no code, only the RFC 9111 conformance table:
// tests that run the real sidecar (the server package's wiring, on real
// sockets, with a test clock) in front of a scriptable httptest origin and
// check, per section of RFC 9111, what a shared cache must do with the
// origin's headers — store, reuse, revalidate with which conditional,
// report which Age, or answer 504.
//
// Each row is one Case (script.Case): the route's settings, the
// origin's answers in order, and requests with the clock moved between
// them and what each must show. A section is one table, one Test function:
//
//	storing_test.go     §3     storing; §3.5 Authorization
//	vary_test.go        §4.1   Vary: which stored variant answers
//	freshness_test.go   §4.2   freshness, §4.2.3 age
//	validation_test.go  §4.3   validation, 304s, client conditionals
//	directives_test.go  §5.2   request directives, §4.2.4 serving stale,
//	                           §5.2.2.2 an unreachable origin (504)
//	head_test.go        §4     HEAD from the stored GET (RFC 9110 §9.3.2)
//	invalidation_test.go §4.4  invalidation; surrogate keys; 1xx interim
//
// The vocabulary (Case, Resp, Step, the scripted origin, the checks) lives
// in the non-test package script, so that cmd/sidecache's
// TestConformanceBinary plays clock-free rows against the built binary
// too; harness_test.go only starts the in-process sidecar.
//
// Adding a row is adding a struct literal to its section's table. Rows of
// a new section get a new file with one Test function calling runTable;
// Case.Routes adds write routes, Step.Method and Step.Path send unsafe
// methods to other URIs, Resp.Hints makes the origin send a 103 first,
// Resp.Drop makes it close the connection unanswered, Resp.Hang makes it
// never answer (the 2 s upstream.timeout ends the request), and Step.Check
// sees everything the client and the origin saw (Result.Interim,
// Result.Origin).
package conformance
