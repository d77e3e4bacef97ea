package traffic

import (
	"net/http"
	"strings"
)

// CaseVariant is the kind-th case variant of the upper-case method m: all
// lower case (get), capitalised (Get), or all but the first letter upper
// (gET). Method names are case-sensitive (RFC 9110 §9.1), so none is m
// to the sidecar, but Werkzeug upper-cases the method and ASP.NET Core
// routes without case, so an app applies each as m.
func CaseVariant(m string, kind int) string {
	switch kind % 3 {
	case 0:
		return strings.ToLower(m)
	case 1:
		return m[:1] + strings.ToLower(m[1:])
	}
	return strings.ToLower(m[:1]) + m[1:]
}

// drawMethodCase spells about one read or list in twenty-five with a case
// variant of its GET or HEAD (read-method-case), on a sequence of its own
// (stream 53), so the other draws are unchanged; it draws the same
// number of times for every request. The sidecar must refuse it 400
// unsent (as NGINX refuses any method with a lower-case letter):
// forwarded as the write it is to the sidecar, the origin's 200 dropped
// the URI on every replica. The requests written by hand with odd
// framing, and those sent in absolute-form, are left as they are.
func (g *Gen) drawMethodCase(q *Request) {
	roll, kind := g.methodCase.IntN(100), g.methodCase.IntN(3)
	if !g.mix.Has("read-method-case") || roll >= 4 || q.Kind == "write" || q.Method != http.MethodGet && q.Method != http.MethodHead ||
		q.Asterisk || q.Folded || q.HalfClose || q.Absolute || q.Hangup {
		return
	}
	q.MethodCase = CaseVariant(q.Method, kind)
}
