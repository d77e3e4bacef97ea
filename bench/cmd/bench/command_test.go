package main

import "testing"

func TestCommandLineQuotes(t *testing.T) {
	got := commandLine([]string{"-cpu", "-cpu-sidecars", "pod=bin/sidecache GOMEMLIMIT=1", "it's"})
	want := `bench -cpu -cpu-sidecars 'pod=bin/sidecache GOMEMLIMIT=1' 'it'\''s'`
	if got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}
