package invariant

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
)

// The secret-token row (PCG stream 70): once a seed, between rounds, one
// replica applies its config with admin.token written as a Kubernetes
// Secret made from a file gives it through the documented
// token: "${SIDECACHE_ADMIN_TOKEN:-}": the file's final newline inside
// the quotes, which YAML folds into a trailing space. The operator, who
// holds the token without it, then purges a tag no entry carries and
// inspects a URL of route r through that replica; each must answer 200
// (docs/configuration.md, admin.token: read without surrounding blanks,
// as a client presents it). Then the whole file comes back. The reload
// changes no route, so it drops nothing; the purged tag is the row's own.

// tokenRow is the row's state in a run.
type tokenRow struct {
	rng *rand.Rand
	at  int // the round after which it plays (-1: never)
}

// drawTokenRound draws the round after which the row plays, from stream
// 70 alone.
func (r *run) drawTokenRound() {
	r.token.rng, r.token.at = rand.New(rand.NewPCG(r.cfg.Seed, 70)), -1
	if r.cfg.Mix.Has("secret-token") && r.cfg.ReloadToken != nil && r.cfg.Rounds >= 2 {
		r.token.at = r.token.rng.IntN(r.cfg.Rounds)
	}
}

// secretToken plays the row after round (see above).
func (r *run) secretToken(ctx context.Context, round int) {
	if round != r.token.at {
		return
	}
	k := r.token.rng.IntN(len(r.cfg.Replicas))
	if err := r.cfg.ReloadToken(k, true); err != nil {
		r.violate("secret-token", "replica%d: reload with the Secret's token: %v", k, err)
		return
	}
	defer func() {
		if err := r.cfg.ReloadToken(k, false); err != nil {
			r.violate("secret-token", "replica%d: reload of the whole file: %v", k, err)
		}
	}()
	admin := r.cfg.Admins[k]
	for _, c := range []struct{ method, target string }{
		{http.MethodPost, admin + "/purge?tag=secret-token-row"},
		{http.MethodGet, admin + "/cache?url=" + url.QueryEscape("http://"+r.cfg.Host+"/r/96/summary")},
	} {
		req, err := http.NewRequestWithContext(ctx, c.method, c.target, nil)
		if err != nil {
			r.violate("secret-token", "%s %s: %v", c.method, c.target, err)
			return
		}
		req.Header.Set("Authorization", "Bearer "+r.cfg.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.violate("secret-token", "%s %s: %v", c.method, c.target, err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusInternalServerError && c.method == http.MethodPost:
			// Redis did not confirm the purge in time (a loaded
			// machine): the token was taken, which is what is checked.
			r.chk.Count("secret-token-500", 1)
		case resp.StatusCode != http.StatusOK:
			r.violate("secret-token", "replica%d %s %s with admin.token from a Secret ending in a newline: %s %q, want 200 (the token is read without surrounding blanks)", k, c.method, c.target, resp.Status, body)
		default:
			r.chk.Count("secret-token", 1)
		}
	}
}
