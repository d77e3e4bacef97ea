package main

import (
	"testing"
	"time"
)

func TestQuickFlags(t *testing.T) {
	p, err := parseFlags([]string{"-quick", "-workers", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Duration >= 10*time.Second || p.Workers != 7 || len(p.Steps) != 0 || p.Keys != 200 {
		t.Errorf("quick params: %+v", p)
	}
	if _, err := parseFlags([]string{"-configs", "direct,bogus"}); err == nil {
		t.Error("unknown configuration accepted")
	}
}
