package cachekey

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fuzzReq builds a request from a fuzzed escaped path, raw query and
// header value. A path that decodes becomes Path+RawPath as the server
// would set them; one that does not is taken as an already decoded Path.
func fuzzReq(path, rawQuery, hval string) *http.Request {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Path: path, RawQuery: rawQuery}
	if dec, err := url.PathUnescape(path); err == nil {
		u.Path, u.RawPath = dec, path
	}
	return &http.Request{Method: "GET", Host: "example.com", URL: u,
		Header: http.Header{"Accept-Language": {hval}}}
}

// canonical is an independent, slow statement of what a key must
// distinguish: the normal-form path, the chosen parameters in normal form
// sorted by name, and the trimmed header value.
type canonical struct {
	Path   string
	Query  [][2]string
	Header string
}

func canon(r *http.Request, names []string) canonical {
	var c canonical
	// RFC 3986 §6.2.2 over the path net/url would send.
	ep := r.URL.EscapedPath()
	var b strings.Builder
	for i := 0; i < len(ep); i++ {
		if ep[i] == '%' {
			v, _ := strconv.ParseUint(ep[i+1:i+3], 16, 8)
			if ch := byte(v); isAlnum(ch) || strings.IndexByte("-._~", ch) >= 0 {
				b.WriteByte(ch)
			} else {
				fmt.Fprintf(&b, "%%%02X", ch)
			}
			i += 2
			continue
		}
		b.WriteByte(ep[i])
	}
	c.Path = b.String()

	for _, seg := range strings.Split(r.URL.RawQuery, "&") {
		if seg == "" {
			continue
		}
		k, v, _ := strings.Cut(seg, "=")
		if names == nil || slices.Contains(names, lenientUnescape(k)) {
			c.Query = append(c.Query, [2]string{normal(k), normal(v)})
		}
	}
	// By name only, stable: a repeated parameter's values keep their order.
	slices.SortStableFunc(c.Query, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) })
	c.Header = strings.Trim(r.Header.Get("Accept-Language"), " \t\r\n")
	return c
}

// normal spells a query component in RFC 3986 §6.2.2 normal form, one
// token per input unit, each spelt so no two kinds can be confused:
// "u:" an unreserved or allowed-literal byte, "e:" a percent-encoded byte
// (or one outside the URI grammar, which RFC 3987 §3.1 maps to its
// encoding), "r:" a raw "=" or a "%" that starts no valid escape.
func normal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			d := byte(v)
			if isAlnum(d) || strings.ContainsRune("-._~", rune(d)) {
				fmt.Fprintf(&b, "u:%c ", d)
			} else {
				fmt.Fprintf(&b, "e:%02x ", d)
			}
			i += 2
			continue
		}
		switch {
		case c == '%' || c == '=':
			fmt.Fprintf(&b, "r:%02x ", c)
		case c < 0x80 && (isAlnum(c) || strings.ContainsRune("-._~!$'()*+,/:;@?", rune(c))):
			fmt.Fprintf(&b, "u:%c ", c)
		default:
			fmt.Fprintf(&b, "e:%02x ", c)
		}
	}
	return b.String()
}

// lenientUnescape decodes a query component, taking a malformed "%" as a
// literal percent sign.
func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			b.WriteString("%25")
			continue
		}
		b.WriteByte(s[i])
	}
	out, err := url.QueryUnescape(b.String())
	if err != nil {
		panic(err)
	}
	return out
}

func FuzzBuild(f *testing.F) {
	f.Add("/clients/1", "b=2&a=1", "en", "/clients/1", "a=%31&b=2", "en")
	f.Add("/a%2Fb", "a=b+c", " en ", "/a/b", "a=b%2Bc", "en")
	f.Add("/x%41", "a&a=", "", "/xA", "a=&a", "")
	f.Add("/x", "a=1%26b%3D2", "x y", "/x", "a=1&b=2", "x%20y")
	f.Add("/%zz", "%zz=%", "|", "/%25zz", "%25zz=%25", "%7C")
	f.Add("/a b", "q=a b&q=%C3%A9", "é", "/a%20b", "q=%C3%A9&q=a+b", "é")
	f.Add("/x", "lang=fr&lang=en", "", "/x", "lang=en&lang=fr", "")
	f.Add("/x", "q=%zz&a=1;b=2", "", "/x", "q=%25zz&a=1%3Bb=2", "")
	f.Add("/x", "b=1&a=2&callback=x", "", "/x", "a=2&b=1", "")
	// Spellings an origin reads as one id (internal/spelling.AppendInts) key
	// apart: only the canonical one is stored, or a slug is stored under
	// its own key and tagged with its reading.
	f.Add("/clients/%205", "", "", "/clients/5", "", "")
	f.Add("/clients/5%20", "", "", "/clients/5%09", "", "")
	f.Add("/clients/5-acme", "ids=%205,5-acme", "", "/clients/5", "ids=5", "")

	all := &Options{AllQuery: true, Headers: []string{"Accept-Language"}}
	some := &Options{Query: []string{"a", "b"}, Headers: []string{"Accept-Language"}}
	f.Fuzz(func(t *testing.T, p1, q1, h1, p2, q2, h2 string) {
		r1, r2 := fuzzReq(p1, q1, h1), fuzzReq(p2, q2, h2)
		for _, o := range []*Options{all, some} {
			var names []string
			if !o.AllQuery {
				names = o.Query
			}
			k1, k2 := Build(r1, o), Build(r2, o)
			if again := Build(r1, o); again != k1 {
				t.Fatalf("Build not deterministic: %q then %q", k1, again)
			}
			c1, c2 := canon(r1, names), canon(r2, names)
			if same := reflect.DeepEqual(c1, c2); same != (k1 == k2) {
				t.Fatalf("canonical equal=%v but keys equal=%v\n%+v -> %q\n%+v -> %q", same, k1 == k2, c1, k1, c2, k2)
			}

			// Reordering the parameters changes the key exactly when it
			// reorders the values of one name.
			segs := strings.Split(q1, "&")
			slices.Reverse(segs)
			r3 := fuzzReq(p1, strings.Join(segs, "&"), h1)
			if k3, c3 := Build(r3, o), canon(r3, names); reflect.DeepEqual(c1, c3) != (k1 == k3) {
				t.Fatalf("reordered query %q: canonical equal=%v, keys %q, %q", r3.URL.RawQuery, reflect.DeepEqual(c1, c3), k1, k3)
			}

			// The query forwarded upstream holds exactly the keyed
			// parameters, as the client spelt them.
			fq := ForwardQuery(q1, o)
			r4 := fuzzReq(p1, fq, h1)
			if k4 := Build(r4, o); k4 != k1 {
				t.Fatalf("forwarded query %q of %q keys as %q, not %q", fq, q1, k4, k1)
			}
			for _, seg := range strings.Split(fq, "&") {
				if k, _, _ := strings.Cut(seg, "="); seg != "" && names != nil && !slices.Contains(names, lenientUnescape(k)) {
					t.Fatalf("forwarded query %q of %q holds unkeyed %q", fq, q1, seg)
				}
			}
		}
	})
}

// accepts is the reference reading of Accept-Encoding (RFC 9110 §12.5.3):
// whether the client accepts coding c. It trims only OWS, so it never
// recognises an element that NormalizeAcceptEncoding would not.
func accepts(header, c string) bool {
	listed, pos, zero := false, false, false
	starPos, starZero := false, false
	for _, el := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(el, ";")
		name = strings.ToLower(strings.Trim(name, " \t"))
		if name == "x-gzip" {
			name = "gzip"
		}
		q, qok := 1.0, true
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.Trim(k, " \t"), "q") {
				var err error
				q, err = strconv.ParseFloat(strings.Trim(v, " \t"), 64)
				qok = err == nil
				break
			}
		}
		switch name {
		case c:
			listed = true
			pos = pos || qok && q > 0
			zero = zero || qok && q == 0
		case "*":
			starPos = starPos || qok && q > 0
			starZero = starZero || qok && q == 0
		}
	}
	if listed {
		return pos && !zero
	}
	return starPos && !starZero
}

func FuzzNormalizeAcceptEncoding(f *testing.F) {
	for _, s := range []string{"", "gzip, deflate, br, zstd", "*", "*, gzip;q=0", "x-gzip;q=0.5", "gzip;q=0, gzip",
		"compress;q=0, *", "br ; q = 1.000", "GZIP;q=0.0001", "*;q=0, zstd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n := NormalizeAcceptEncoding(v)
		if !slices.Contains(encodingSets[:], n) {
			t.Fatalf("NormalizeAcceptEncoding(%q) = %q, not a known set", v, n)
		}
		// The normal form reads back as itself, except a "*" that admits
		// only some known codings: "*" alone would admit them all.
		if again := NormalizeAcceptEncoding(n); again != n && (!strings.HasPrefix(n, "*") || n == encodingSets[31]) {
			t.Fatalf("not idempotent: %q -> %q -> %q", v, n, again)
		}
		// Safety: a body in any coding the normal form admits is one the
		// client accepted.
		for _, c := range []string{"br", "deflate", "gzip", "zstd", "compress", "dcz"} {
			if AcceptsEncoding(n, c) && !accepts(v, c) {
				t.Fatalf("Accept-Encoding %q normalises to %q, which admits %s the client refused", v, n, c)
			}
		}
		if AcceptsEncoding(n, "x-gzip") != AcceptsEncoding(n, "gzip") {
			t.Fatalf("x-gzip and gzip differ under %q", n)
		}
		// The variant chosen and the codings forwarded are ones the
		// client accepts, whatever the origin has used.
		for used := range Codings(variantCodings + 1) {
			if c := VariantCoding([]string{v}, used); c != Identity && (!accepts(v, c) || used.With(c) != used) {
				t.Fatalf("Accept-Encoding %q, used %03b: variant %s", v, used, c)
			}
		}
		for _, c := range strings.Split(ForwardAcceptEncoding([]string{v}), ",") {
			if c != Identity && !accepts(v, c) {
				t.Fatalf("Accept-Encoding %q forwarded as %q", v, ForwardAcceptEncoding([]string{v}))
			}
		}
	})
}

func BenchmarkBuild(b *testing.B) {
	r := &http.Request{Method: "GET", Host: "api.example.com",
		URL:    &url.URL{Path: "/clients/42", RawQuery: "lang=en&fields=a,b&utm_source=x"},
		Header: http.Header{"Accept-Language": {"en-US"}, "Accept-Encoding": {"gzip, br"}}}
	for _, bc := range []struct {
		name string
		o    *Options
	}{
		{"path", &Options{}},
		{"chosen", &Options{Query: []string{"fields", "lang"}, Headers: []string{"Accept-Language"}}},
		{"all", &Options{AllQuery: true, Headers: []string{"Accept-Language"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Build(r, bc.o)
			}
		})
	}
	b.Run("frame", func(b *testing.B) { // Build "all"'s key, its path written alone
		b.ReportAllocs()
		f := NewFrame(r, &Options{AllQuery: true, Headers: []string{"Accept-Language"}})
		for b.Loop() {
			_ = f.Key(r.URL)
		}
	})
	b.Run("vary", func(b *testing.B) {
		b.ReportAllocs()
		names := []string{"Accept-Encoding"}
		for b.Loop() {
			_ = WithVary("GET api.example.com/clients/42", names, r.Header, VariantCoding(r.Header["Accept-Encoding"], Codings(0).With("gzip")))
		}
	})
}
