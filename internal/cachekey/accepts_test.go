package cachekey

import (
	"net/http"
	"testing"
)

func TestAcceptsStored(t *testing.T) {
	tests := []struct {
		accept, ce string
		want       bool
	}{
		{"", "", true},
		{"", "identity", true},
		{"", "gzip", false},
		{"gzip", "", true},
		{"gzip, br", "gzip", true},
		{"br", "gzip", false},
		{"gzip;q=0", "gzip", false},
		{"*", "gzip", true},
		{"*, gzip;q=0", "gzip", false},
	}
	for _, tt := range tests {
		t.Run(tt.accept+"/"+tt.ce, func(t *testing.T) {
			req := http.Header{}
			if tt.accept != "" {
				req.Set("Accept-Encoding", tt.accept)
			}
			stored := http.Header{}
			if tt.ce != "" {
				stored.Set("Content-Encoding", tt.ce)
			}
			if got := AcceptsStored(req, stored); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
