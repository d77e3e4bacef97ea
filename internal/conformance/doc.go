// Package conformance holds no code, only the RFC 9111 conformance table:
// tests that run the real sidecar (the server package's wiring, on real
// sockets) in front of a scriptable httptest origin and check, per section
// of RFC 9111, what a shared cache must do with the origin's headers —
// store, reuse, revalidate with which conditional, report which Age, or
// answer 504.
//
// Each row is one Case (see harness_test.go): the route's config, the
// origin's answers in order, and a sequence of requests with the clock
// moved between them and what each must show. Adding a row is adding a
// struct literal to the table of its section's file.
package conformance
