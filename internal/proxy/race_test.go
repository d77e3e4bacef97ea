//go:build race

package proxy_test

// raceAllocs is what -race adds to an allocation count: sync.Pool drops a
// share of what is put back under the race detector, so a pooled buffer is
// now and then allocated again.
const raceAllocs = 1
