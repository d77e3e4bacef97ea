package accesslog

import (
	"net/url"
	"strings"
	"testing"
)

func TestRedactQuery(t *testing.T) {
	names := []string{"token", "API_KEY"}
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"a=1&b=2", "a=1&b=2"},
		{"token=s3cret&a=1", "token=REDACTED&a=1"},
		{"a=1&Api_Key=k&api%5Fkey=k2&token", "a=1&Api_Key=REDACTED&api%5Fkey=REDACTED&token"},
		{"tokens=x&token=&x=token", "tokens=x&token=REDACTED&x=token"},
	} {
		if got := RedactQuery(c.in, names); got != c.want {
			t.Errorf("RedactQuery(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := RedactQuery("token=x", nil); got != "token=x" {
		t.Errorf("no names: %q", got)
	}
}

// FuzzRedactQuery: whatever the query, no value of a redacted parameter
// survives (as net/url parses it), and a query without one is kept as is.
func FuzzRedactQuery(f *testing.F) {
	for _, s := range []string{"token=a", "a=1&token=2&b", "%74oken=x", "token=a%26b&c=d", "&&=&token==x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := RedactQuery(q, []string{"token"})
		in, err1 := url.ParseQuery(q)
		got, err2 := url.ParseQuery(out)
		if err1 != nil || err2 != nil {
			return
		}
		for name, vs := range got {
			if !strings.EqualFold(name, "token") {
				continue
			}
			for _, v := range vs {
				if v != Redacted && v != "" { // an empty value leaks nothing
					t.Fatalf("RedactQuery(%q) = %q keeps %s=%q", q, out, name, v)
				}
			}
		}
		named := false
		for name := range in {
			named = named || strings.EqualFold(name, "token")
		}
		if !named && out != q {
			t.Fatalf("RedactQuery(%q) = %q changed a query without the name", q, out)
		}
	})
}
