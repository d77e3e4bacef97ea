package load

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Workload is one row of the main table: what to request and which
// statuses count as success.
type Workload struct {
	Name     string // flag value: "clients-get"
	Method   string // table column
	Endpoint string // table column
	About    string // one line for the report
	Make     func(p Params) func() Request
	OK       func(code int) bool
}

// Params is what a workload's requests are drawn from.
type Params struct {
	Keys KeyDist
	Bulk int // IDs per bulk request
}

func is(codes ...int) func(int) bool {
	return func(c int) bool {
		for _, x := range codes {
			if c == x {
				return true
			}
		}
		return false
	}
}

func fixed(method, path string) func(Params) func() Request {
	return func(Params) func() Request {
		return func() Request { return Request{Method: method, Path: path} }
	}
}

func getByID(prefix string) func(p Params) func() Request {
	return func(p Params) func() Request {
		return func() Request { return Request{Method: "GET", Path: prefix + strconv.Itoa(p.Keys())} }
	}
}

func write(method string) func(p Params) func() Request {
	return func(p Params) func() Request {
		return func() Request {
			r := Request{Method: method, Path: "/clients/" + strconv.Itoa(p.Keys())}
			if method == "PATCH" {
				r.Body = patchBody()
			}
			return r
		}
	}
}

// patchBody renames a client; a fresh name each time, so every PATCH
// really changes the record.
func patchBody() []byte {
	return []byte(`{"name":"Bench ` + strconv.Itoa(rand.IntN(1e6)) + `"}`)
}

// bulkPath draws n distinct IDs in random order (an IN list a client
// would send), retrying duplicates a bounded number of times so a skewed
// distribution over few keys still terminates.
func bulkPath(key KeyDist, n int) string {
	var b strings.Builder
	b.WriteString("/users?ids=")
	seen := make(map[int]bool, n)
	for i := 0; i < n; i++ {
		id := key()
		for try := 0; seen[id] && try < 100; try++ {
			id = key()
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if len(seen) > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}

// workloads is the table of rows, built fresh for each caller so no one
// shares (or can change) another's copy.
func workloads() []Workload {
	return []Workload{
		{
			Name: "clients-get", Method: "GET", Endpoint: "/clients/{id}",
			About: "one client by ID",
			Make:  getByID("/clients/"), OK: is(200, 304),
		},
		{
			Name: "users-get", Method: "GET", Endpoint: "/users/{id}",
			About: "one user by ID (the batchable route)",
			Make:  getByID("/users/"), OK: is(200, 304),
		},
		{
			Name: "users-bulk", Method: "GET", Endpoint: "/users?ids=…",
			About: "a client's own bulk read of distinct IDs (split by the sidecar when configured)",
			Make: func(p Params) func() Request {
				return func() Request { return Request{Method: "GET", Path: bulkPath(p.Keys, p.Bulk)} }
			},
			OK: is(200),
		},
		{
			Name: "clients-patch", Method: "PATCH", Endpoint: "/clients/{id}",
			About: "rename a client (invalidates client:{id})",
			Make:  write("PATCH"), OK: is(200),
		},
		{
			Name: "clients-delete", Method: "DELETE", Endpoint: "/clients/{id}",
			About: "delete a client; 404 for one already deleted in the run counts as success (the data is reset before each run, not during it)",
			Make:  write("DELETE"), OK: is(204, 404),
		},
		{
			Name: "self", Method: "GET", Endpoint: "/self",
			About: "a fixed small object (one slot per call upstream)",
			Make:  fixed("GET", "/self"), OK: is(200),
		},
		{
			Name: "clients-list", Method: "GET", Endpoint: "/clients",
			About: "the first 20 clients",
			Make:  fixed("GET", "/clients"), OK: is(200),
		},
		{
			Name: "mixed", Method: "mix", Endpoint: "80% GET client, 10% GET user, 5% bulk, 5% PATCH client",
			About: "reads dominate, writes invalidate; no DELETE so the data set stays whole",
			Make: func(p Params) func() Request {
				return func() Request {
					switch n := rand.IntN(100); {
					case n < 80:
						return Request{Method: "GET", Path: "/clients/" + strconv.Itoa(p.Keys())}
					case n < 90:
						return Request{Method: "GET", Path: "/users/" + strconv.Itoa(p.Keys())}
					case n < 95:
						return Request{Method: "GET", Path: bulkPath(p.Keys, p.Bulk)}
					default:
						return Request{Method: "PATCH", Path: "/clients/" + strconv.Itoa(p.Keys()), Body: patchBody()}
					}
				}
			},
			OK: is(200, 304),
		},
	}
}

// DefaultWorkloads are the rows run unless -rows says otherwise.
const DefaultWorkloads = "clients-get,users-get,users-bulk,clients-patch,clients-delete,mixed"

// PickWorkloads looks up the rows names lists, in that order.
func PickWorkloads(names []string) ([]Workload, error) {
	all := workloads()
	var out []Workload
	for _, name := range names {
		found := false
		for _, w := range all {
			if w.Name == name {
				out = append(out, w)
				found = true
			}
		}
		if !found {
			var known []string
			for _, w := range all {
				known = append(known, w.Name)
			}
			return nil, fmt.Errorf("unknown row %q in -rows (known: %s)", name, strings.Join(known, ","))
		}
	}
	return out, nil
}
