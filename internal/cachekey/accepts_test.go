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
	// Every line of either field (RFC 9110 §5.3).
	lines := []struct {
		accept, ce []string
		want       bool
	}{
		{nil, []string{"", "gzip"}, false},
		{nil, []string{"identity", "gzip"}, false},
		{[]string{"gzip"}, []string{"identity", "gzip"}, true},
		{[]string{"identity", "gzip"}, []string{"gzip"}, true},
		{[]string{"gzip"}, []string{"gzip", "br"}, false},
	}
	for _, tt := range lines {
		req, stored := http.Header{"Accept-Encoding": tt.accept}, http.Header{"Content-Encoding": tt.ce}
		if got := AcceptsStored(req, stored); got != tt.want {
			t.Errorf("Accept-Encoding %q, Content-Encoding %q: got %v, want %v", tt.accept, tt.ce, got, tt.want)
		}
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
