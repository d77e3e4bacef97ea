package origin

import (
	"net/http"
	"strings"
)

// AppliedMethod is the method the origin applies r as, read as frameworks
// read it (write-method-override): a method override field
// (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override, under
// any spelling a CGI-style stack reads as them), a POST's _method from its
// query or form body, and the method upper-cased (Werkzeug; but the
// sidecar refuses a known method spelled with a lower-case letter, so
// none may arrive: TakeMethodCases).
func AppliedMethod(r *http.Request) string {
	for k, vs := range r.Header {
		switch strings.ToUpper(strings.ReplaceAll(k, "_", "-")) {
		case "X-HTTP-METHOD-OVERRIDE", "X-HTTP-METHOD", "X-METHOD-OVERRIDE":
			if len(vs) > 0 && vs[0] != "" {
				return strings.ToUpper(vs[0])
			}
		}
	}
	m := strings.ToUpper(r.Method)
	if m == http.MethodPost && (strings.Contains(r.URL.RawQuery, "_method=") ||
		strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")) {
		if err := r.ParseForm(); err == nil && r.Form.Get("_method") != "" {
			return strings.ToUpper(r.Form.Get("_method"))
		}
	}
	return m
}

// noteMethodCase records r when its method holds a lower-case letter
// (read-method-case, write-method-override's lower-case patch): the
// origin folds case as Werkzeug does, so it would apply "get" as the read
// it spells and "patch" as PATCH, which the sidecar, reading methods
// case-sensitively, takes otherwise; it refuses them unsent.
func (o *Origin) noteMethodCase(r *http.Request) {
	if r.Method == strings.ToUpper(r.Method) {
		return
	}
	o.mu.Lock()
	o.cased = append(o.cased, r.Method+" "+r.URL.RequestURI())
	o.mu.Unlock()
}

// TakeMethodCases returns the calls received since the last
// TakeMethodCases whose method held a lower-case letter.
func (o *Origin) TakeMethodCases() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.cased
	o.cased = nil
	return c
}
