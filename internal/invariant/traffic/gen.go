// Package traffic is the invariant harness's hostile clients: four
// identities, each on its own loopback address with its own credentials,
// and the draws that turn a seed into their requests (paths and their
// spellings, queries, headers, HTTP edges, conditionals naming copies
// any identity received). A Request records what it sent, so the checks
// can hold its answer to it; its Budget is the upstream calls it may
// cost. It knows nothing of the checks or of how rounds are played.
package traffic

import (
	"math/rand/v2"
	"sync"

	"github.com/sidecache/sidecache/internal/invariant/mix"
)

// Gen draws one run's requests. Its rng is the run's own, shared with
// the draws of the origin's profiles, so the seed alone fixes the whole
// sequence of draws, as before the harness was split.
type Gen struct {
	rng *rand.Rand
	// folds is the obs-fold draw's own stream (34), leads what a folded
	// request's connection carries before it (obs-fold-lead, 36),
	// lenient the lenient-id rows' (drawLenient, 31), multi their ids
	// several stacks read differently (multiSpelling, 39), override the
	// method spellings of writes (drawOverride, 47): the draws of rng,
	// and of lenient, stay as they were.
	folds, leads, lenient, multi, override *rand.Rand
	// expects draws the expect-read row (drawExpectRead, stream 35), as
	// folds does; methodCase the read-method-case row (drawMethodCase,
	// stream 53).
	expects, methodCase *rand.Rand
	mix                 mix.Mix
	ids                 []*Identity
	replicas            int    // how many replicas a request may go through
	host                string // the Host header of every request by default
	seed                uint64 // names the X-Request-Ids it draws
	rid                 int
	// lists are id lists drawn before, sent again (Draw).
	lists [][]string

	mu sync.Mutex
	// copies are the answers with validators the clients received, by
	// resource (conditional.go), for later conditional requests.
	copies map[string][]*Copy
}

// NewGen is the generator of a run of seed through replicas replicas.
func NewGen(rng *rand.Rand, m mix.Mix, seed uint64, replicas int, host string) *Gen {
	return &Gen{rng: rng, folds: rand.New(rand.NewPCG(seed, 34)), leads: rand.New(rand.NewPCG(seed, 36)), lenient: rand.New(rand.NewPCG(seed, 31)), multi: rand.New(rand.NewPCG(seed, 39)), override: rand.New(rand.NewPCG(seed, 47)), expects: rand.New(rand.NewPCG(seed, 35)), methodCase: rand.New(rand.NewPCG(seed, 53)), mix: m, ids: newIdentities(), replicas: replicas, host: host, seed: seed, copies: map[string][]*Copy{}}
}

func (g *Gen) chance(pct int) bool { return g.rng.IntN(100) < pct }

// CloseIdle closes the identities' idle connections: a run is over.
func (g *Gen) CloseIdle() {
	for _, id := range g.ids {
		id.Client.CloseIdleConnections()
		id.Proxied.CloseIdleConnections()
	}
}

// Who is the run's identity i (alice, bob, carol, dave, modulo four), for
// a row that writes its requests by hand (the runner's upgrade.go).
func (g *Gen) Who(i int) *Identity { return g.ids[i%len(g.ids)] }
