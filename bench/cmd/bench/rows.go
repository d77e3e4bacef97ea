package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// workload is one row of the main table: what to request and which
// statuses count as success.
type workload struct {
	name     string // flag value: "clients-get"
	method   string // table column
	endpoint string // table column
	about    string // one line for the report
	make     func(p workloadParams) func() request
	ok       func(code int) bool
}

type workloadParams struct {
	keys keyDist
	bulk int // IDs per bulk request
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

func fixed(method, path string) func(workloadParams) func() request {
	return func(workloadParams) func() request {
		return func() request { return request{method: method, path: path} }
	}
}

func getByID(prefix string) func(p workloadParams) func() request {
	return func(p workloadParams) func() request {
		return func() request { return request{method: "GET", path: prefix + strconv.Itoa(p.keys())} }
	}
}

func write(method string) func(p workloadParams) func() request {
	return func(p workloadParams) func() request {
		return func() request {
			r := request{method: method, path: "/clients/" + strconv.Itoa(p.keys())}
			if method == "PATCH" {
				r.body = patchBody()
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
func bulkPath(key keyDist, n int) string {
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

var workloads = []workload{
	{
		name: "clients-get", method: "GET", endpoint: "/clients/{id}",
		about: "one client by ID",
		make:  getByID("/clients/"), ok: is(200, 304),
	},
	{
		name: "users-get", method: "GET", endpoint: "/users/{id}",
		about: "one user by ID (the batchable route)",
		make:  getByID("/users/"), ok: is(200, 304),
	},
	{
		name: "users-bulk", method: "GET", endpoint: "/users?ids=…",
		about: "a client's own bulk read of distinct IDs (split by the sidecar when configured)",
		make: func(p workloadParams) func() request {
			return func() request { return request{method: "GET", path: bulkPath(p.keys, p.bulk)} }
		},
		ok: is(200),
	},
	{
		name: "clients-patch", method: "PATCH", endpoint: "/clients/{id}",
		about: "rename a client (invalidates client:{id})",
		make:  write("PATCH"), ok: is(200),
	},
	{
		name: "clients-delete", method: "DELETE", endpoint: "/clients/{id}",
		about: "delete a client; 404 for one already deleted in the run counts as success (the data is reset before each run, not during it)",
		make:  write("DELETE"), ok: is(204, 404),
	},
	{
		name: "self", method: "GET", endpoint: "/self",
		about: "a fixed small object (one slot per call upstream)",
		make:  fixed("GET", "/self"), ok: is(200),
	},
	{
		name: "clients-list", method: "GET", endpoint: "/clients",
		about: "the first 20 clients",
		make:  fixed("GET", "/clients"), ok: is(200),
	},
	{
		name: "mixed", method: "mix", endpoint: "80% GET client, 10% GET user, 5% bulk, 5% PATCH client",
		about: "reads dominate, writes invalidate; no DELETE so the data set stays whole",
		make: func(p workloadParams) func() request {
			return func() request {
				switch n := rand.IntN(100); {
				case n < 80:
					return request{method: "GET", path: "/clients/" + strconv.Itoa(p.keys())}
				case n < 90:
					return request{method: "GET", path: "/users/" + strconv.Itoa(p.keys())}
				case n < 95:
					return request{method: "GET", path: bulkPath(p.keys, p.bulk)}
				default:
					return request{method: "PATCH", path: "/clients/" + strconv.Itoa(p.keys()), body: patchBody()}
				}
			}
		},
		ok: is(200, 304),
	},
}

// defaultWorkloads are the rows run unless -rows says otherwise.
const defaultWorkloads = "clients-get,users-get,users-bulk,clients-patch,clients-delete,mixed"

func pickWorkloads(list string) ([]workload, error) {
	var out []workload
	for _, name := range splitList(list) {
		found := false
		for _, w := range workloads {
			if w.name == name {
				out = append(out, w)
				found = true
			}
		}
		if !found {
			var names []string
			for _, w := range workloads {
				names = append(names, w.name)
			}
			return nil, fmt.Errorf("unknown row %q in -rows (known: %s)", name, strings.Join(names, ","))
		}
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
