//go:build race

package main

// raceEnabled builds the binaries under test with -race too, so a data race
// in the wiring shows up as a failed end-to-end test.
const raceEnabled = true
