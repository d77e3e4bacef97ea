//go:build !race

package proxy_test

const raceAllocs = 0
