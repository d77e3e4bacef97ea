package demo

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// table names one of the two row sets. Clients and users are shaped alike;
// they differ in their ID range, their seed and their ETag prefix, which is
// enough for a cache in front to tell them apart.
type table struct {
	name string // "clients" or "users"
	salt uint64
	size int
}

// row is the mutable state of one record. Rows that were never written are
// not stored: pristine returns them from the ID, so a 10,000-row table costs
// nothing until PATCH or DELETE touches it, and reset just drops the map.
type row struct {
	version  int64
	name     string
	deleted  bool
	modified time.Time
}

type rowKey struct {
	table string
	id    int
}

// record is the JSON shape of one row. Field order is fixed so bodies are
// byte-identical across runs and processes.
type record struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Email     string `json:"email"`
	Version   int64  `json:"version"`
	UpdatedAt string `json:"updated_at"`
	// Bio pads the body to 500 B–1 KiB, the size of a typical row as JSON.
	Bio string `json:"bio"`
}

// epoch is when every pristine row was last modified (plus its ID in
// minutes), so Last-Modified is deterministic too.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	firstNames = []string{"Ada", "Alan", "Barbara", "Claude", "Donald", "Edsger", "Frances", "Grace", "Hedy", "Ivan", "John", "Ken", "Leslie", "Margaret", "Niklaus", "Radia", "Rob", "Shafi", "Tony", "Whitfield"}
	lastNames  = []string{"Lovelace", "Turing", "Liskov", "Shannon", "Knuth", "Dijkstra", "Allen", "Hopper", "Lamarr", "Sutherland", "Backus", "Thompson", "Lamport", "Hamilton", "Wirth", "Perlman", "Pike", "Goldwasser", "Hoare", "Diffie"}
	words      = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod
		tempor incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud
		exercitation ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in
		reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint occaecat
		cupidatat non proident sunt culpa qui officia deserunt mollit anim id est laborum`)
)

// splitmix64 is the seed expander: the same ID always yields the same row.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// pristine is row id of t as it is before any write.
func (t table) pristine(id int) row {
	h := splitmix64(uint64(id) ^ t.salt)
	return row{
		version:  1,
		name:     firstNames[h%uint64(len(firstNames))] + " " + lastNames[(h>>8)%uint64(len(lastNames))],
		modified: epoch.Add(time.Duration(id) * time.Minute),
	}
}

// record renders r as the JSON object for id. The bio is derived from the
// ID alone, so a rename changes only the name, version and dates.
func (t table) record(id int, r row) record {
	h := splitmix64(uint64(id) ^ t.salt ^ 0x5bd1e995)
	target := 380 + int(h%420)
	var b strings.Builder
	for b.Len() < target {
		h = splitmix64(h)
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[h%uint64(len(words))])
	}
	first, _, _ := strings.Cut(r.name, " ")
	return record{
		ID:        id,
		Name:      r.name,
		Email:     fmt.Sprintf("%s.%d@%s.example.com", strings.ToLower(first), id, t.name),
		Version:   r.version,
		UpdatedAt: r.modified.Format(time.RFC3339),
		Bio:       b.String(),
	}
}

// encode returns the body of id and its strong ETag: the version plus a
// hash of the body, so the validator changes whenever the representation
// does (RFC 9110 §8.8.3), even across a reset.
func (t table) encode(id int, r row) (body []byte, etag string) {
	body, err := json.Marshal(t.record(id, r))
	if err != nil {
		panic(err) // a fixed struct of strings and ints always marshals
	}
	h := fnv.New32a()
	h.Write(body)
	return body, fmt.Sprintf(`"%s%d-v%d-%08x"`, t.name[:1], id, r.version, h.Sum32())
}

// Record returns the body and ETag the demo serves for a pristine row of
// table ("clients" or "users"), so a benchmark can serve the same bytes
// from memory. It reports false for an unknown table or an ID outside
// 1..size.
func Record(tableName string, id, size int) (body []byte, etag string, ok bool) {
	t, ok := tables(size, size)[tableName]
	if !ok || id < 1 || id > size {
		return nil, "", false
	}
	body, etag = t.encode(id, t.pristine(id))
	return body, etag, true
}

func tables(clients, users int) map[string]table {
	return map[string]table{
		"clients": {name: "clients", salt: 0xc11e47, size: clients},
		"users":   {name: "users", salt: 0x05e45, size: users},
	}
}
