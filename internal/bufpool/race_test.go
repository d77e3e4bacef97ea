//go:build race

package bufpool_test

const raceEnabled = true
