package cachekey

import (
	"net/http"
	"slices"
	"testing"
)

func TestNormalizeAcceptEncoding(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "identity"},
		{"identity", "identity"},
		{"gzip", "gzip"},
		{"gzip, deflate, br, zstd", "br,deflate,gzip,zstd"},
		{"br,gzip", "br,gzip"},
		{"  GZip ,\tBR  ", "br,gzip"},
		{"x-gzip", "gzip"},
		{"X-GZIP;q=0.5", "gzip"},
		{"gzip;q=0", "identity"},
		{"gzip;q=0.000, br", "br"},
		{"gzip;Q=0", "identity"},
		{"gzip ; q = 0", "identity"},
		{"gzip;q=0.001", "gzip"},
		{"gzip;q=1", "gzip"},
		{"gzip;q=1.000", "gzip"},
		{"gzip;q=1.5", "identity"},
		{"gzip;q=2", "identity"},
		{"gzip;q=0.0001", "identity"},
		{"gzip;q=abc", "identity"},
		{"gzip;q=", "identity"},
		{"gzip;level=9", "gzip"},
		{"gzip;level=9;q=0", "identity"},
		{"gzip, gzip;q=0", "identity"},
		{"gzip;q=0, x-gzip", "identity"},
		{"compress, identity", "identity"},
		{"*", "*,br,deflate,gzip,zstd"},
		{"gzip, *", "*,br,deflate,gzip,zstd"},
		{"*;q=0", "identity"},
		{"*;q=0, gzip", "gzip"},
		{"*, gzip;q=0", "*,br,deflate,zstd"},
		{"*, compress;q=0", "br,deflate,gzip,zstd"},
		{"*, identity;q=0", "*,br,deflate,gzip,zstd"},
		{",,, ,", "identity"},
		{"zstd;q=0.5, br;q=0.9", "br,zstd"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := NormalizeAcceptEncoding(tt.in); got != tt.want {
				t.Errorf("NormalizeAcceptEncoding(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAcceptsEncoding(t *testing.T) {
	tests := []struct {
		norm, ce string
		want     bool
	}{
		{"identity", "", true},
		{"identity", "identity", true},
		{"identity", "gzip", false},
		{"gzip", "gzip", true},
		{"gzip", "GZIP", true},
		{"gzip", "x-gzip", true},
		{"gzip", "br", false},
		{"br,gzip", "br", true},
		{"br,gzip", "gzip, br", true},
		{"gzip", "gzip, br", false},
		{"br,deflate,gzip,zstd", "compress", false},
		{"*,br,deflate,zstd", "compress", true},
		{"*,br,deflate,zstd", "gzip", false},
		{"*,br,deflate,gzip,zstd", "gzip", true},
	}
	for _, tt := range tests {
		t.Run(tt.norm+"/"+tt.ce, func(t *testing.T) {
			if got := AcceptsEncoding(tt.norm, tt.ce); got != tt.want {
				t.Errorf("AcceptsEncoding(%q, %q) = %v, want %v", tt.norm, tt.ce, got, tt.want)
			}
		})
	}
}

func TestParseVary(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []string
		star  bool
	}{
		{"absent", nil, nil, false},
		{"one", []string{"accept-encoding"}, []string{"Accept-Encoding"}, false},
		{"sorted dedup", []string{"Accept-Language, accept-encoding", " ACCEPT-ENCODING ,,"}, []string{"Accept-Encoding", "Accept-Language"}, false},
		{"star", []string{"Accept-Encoding, *"}, nil, true},
		{"star alone line", []string{"Accept", "*"}, nil, true},
		{"empty", []string{""}, nil, false},
		// An element that is no field name names each of its words:
		// a list spelt with another separator than a comma.
		{"blank separated", []string{"Accept-Language X-Tenant"}, []string{"Accept-Language", "X-Tenant"}, false},
		{"semicolon separated", []string{"accept-encoding;x-tenant"}, []string{"Accept-Encoding", "X-Tenant"}, false},
		{"trailing semicolon", []string{"X-Tenant;"}, []string{"X-Tenant"}, false},
		{"quoted", []string{`"X-Tenant"`}, []string{"X-Tenant"}, false},
		{"malformed among good", []string{"Accept-Encoding", "X-Tenant X-Plan ;Accept-Encoding"}, []string{"Accept-Encoding", "X-Plan", "X-Tenant"}, false},
		{"malformed star", []string{"X-Tenant;*"}, nil, true},
		{"blanks around names", []string{" X-Tenant ,\tAccept-Language "}, []string{"Accept-Language", "X-Tenant"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, l := range tt.lines {
				h.Add("Vary", l)
			}
			got, star := ParseVary(h)
			if !slices.Equal(got, tt.want) || star != tt.star {
				t.Errorf("ParseVary(%q) = %q, %v; want %q, %v", tt.lines, got, star, tt.want, tt.star)
			}
		})
	}
}

func TestWithVary(t *testing.T) {
	const key = "GET h/x"
	names := []string{"Accept-Encoding", "Accept-Language"}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name   string
		names  []string
		h      http.Header
		coding string
		want   string
	}{
		{"no names", nil, hdr("Accept-Language", "en"), "gzip", key},
		{"values", names, hdr("Accept-Encoding", "gzip, br", "Accept-Language", "en"), "br", key + " |accept-encoding=br |accept-language=en"},
		{"coding, not the header", names, hdr("Accept-Encoding", "gzip, br", "Accept-Language", "en"), Identity, key + " |accept-encoding=identity |accept-language=en"},
		{"absent", names, hdr(), Identity, key + " |accept-encoding=identity |accept-language"},
		{"empty value", names, hdr("Accept-Language", ""), Identity, key + " |accept-encoding=identity |accept-language="},
		{"lowercase names", []string{"accept-language"}, hdr("Accept-Language", "fr"), "gzip", key + " |accept-language=fr"},
		{"escaped", []string{"X-V"}, hdr("X-V", "a |b"), "", key + " |x-v=a%20%7Cb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WithVary(key, tt.names, tt.h, tt.coding); got != tt.want {
				t.Errorf("WithVary = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("variant never equals a primary key", func(t *testing.T) {
		// A header-keyed primary key and a Vary key over the same header
		// must stay apart.
		r := req(t, "GET", "h", "/x", "Accept-Language", "en")
		primary := Build(r, &Options{Headers: []string{"Accept-Language"}})
		variant := WithVary(Build(r, nil), []string{"Accept-Language"}, r.Header, Identity)
		if primary == variant {
			t.Errorf("primary and variant keys collide: %q", primary)
		}
	})
}

// Issue 24 item 3: a variant is keyed on the coding the sidecar would
// serve — the best one the client accepts among those the origin has used
// — so the six spellings a browser fleet sends share one variant while the
// origin answers identity, and at most one per coding once it compresses.
func TestVariantCoding(t *testing.T) {
	spellings := []string{"", "gzip", "gzip, deflate", "gzip, deflate, br", "gzip, deflate, br, zstd", "br, gzip"}
	for _, tc := range []struct {
		used Codings
		want []string
	}{
		{0, []string{Identity, Identity, Identity, Identity, Identity, Identity}},
		{Codings(0).With("gzip"), []string{Identity, "gzip", "gzip", "gzip", "gzip", "gzip"}},
		{Codings(0).With("gzip").With("br"), []string{Identity, "gzip", "gzip", "br", "br", "br"}},
		{Codings(0).With("gzip").With("br").With("zstd"), []string{Identity, "gzip", "gzip", "br", "zstd", "br"}},
	} {
		for i, ae := range spellings {
			if got := VariantCoding([]string{ae}, tc.used); got != tc.want[i] {
				t.Errorf("used %03b, Accept-Encoding %q: %s, want %s", tc.used, ae, got, tc.want[i])
			}
		}
	}
	if got := VariantCoding([]string{"gzip;q=0, *"}, Codings(0).With("gzip").With("br")); got != "br" {
		t.Errorf("a refused gzip chosen: %s", got)
	}
	if c := Codings(0).With("deflate").With("compress"); c != 0 {
		t.Errorf("codings outside the variant set recorded: %03b", c)
	}
}

func TestStoredCoding(t *testing.T) {
	for ce, want := range map[string]string{"": Identity, " identity": Identity, "gzip": "gzip", "X-GZIP": "gzip", "br ": "br", "zstd": "zstd",
		"deflate": "", "gzip, br": "", "compress": ""} {
		got, ok := StoredCoding(ce)
		if got != want || ok != (want != "") {
			t.Errorf("StoredCoding(%q) = %q, %v; want %q", ce, got, ok, want)
		}
	}
	for ae, want := range map[string]string{"": Identity, "deflate": Identity, "gzip, deflate, br": "br,gzip", "*": "br,gzip,zstd", "zstd;q=0, *": "br,gzip"} {
		if got := ForwardAcceptEncoding([]string{ae}); got != want {
			t.Errorf("ForwardAcceptEncoding(%q) = %q, want %q", ae, got, want)
		}
	}
}
