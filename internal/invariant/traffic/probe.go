package traffic

import "net/http"

// Probe is a plain request of identity i (modulo the four) for path
// through replica: no credentials, no Accept-Encoding, Accept-Language
// or X-Tenant, no conditional. The runner sends it outside the draws
// (the redis-restart row's probe of a resource no round reads), so it
// moves no draw.
func (g *Gen) Probe(i int, method, path, res string, replica int) *Request {
	who := g.ids[i%len(g.ids)]
	q := &Request{
		Who: who, Replica: replica, Method: method, Path: path, Res: res, Hdr: http.Header{},
		Sent: map[string]string{"addr": who.Addr, "cookie": "", "auth": "", "tenant": "", "lang": ""},
		Kind: "read", Route: "r", Budget: BudgetRead,
	}
	if method == http.MethodPatch {
		q.Kind, q.Body, q.Budget = "write", `{"probe":1}`, BudgetWrite
	}
	return q
}
