package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

const minimal = "upstream: {url: http://up:3000}\n"

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseGood(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		env   map[string]string
		check func(t *testing.T, c *Config)
	}{
		{"defaults", minimal, nil, func(t *testing.T, c *Config) {
			eq(t, c.Listen, "127.0.0.1:8080")
			eq(t, c.Admin.Listen, "127.0.0.1:9090")
			eq(t, c.Upstream.Timeout.D(), 10*time.Second)
			eq(t, c.Upstream.MaxIdleConnsPerHost, 256)
			eq(t, c.Upstream.TunnelIdleTimeout.D(), 5*time.Minute)
			eq(t, c.Server.MaxConnections, 4096)
			eq(t, c.Server.MaxPendingSendBytes.Bytes(), int64(64<<20))
			eq(t, c.Server.MaxPendingHeaderBytes.Bytes(), int64(32<<20))
			eq(t, c.Cache.MaxBodyBytes.Bytes(), int64(8<<20))
			eq(t, c.Cache.L1.MaxBytes.Bytes(), int64(256<<20))
			eq(t, c.Cache.L2 == nil, true)
			eq(t, c.ShutdownTimeout.D(), 25*time.Second)
			eq(t, c.ShutdownDelay.D(), time.Duration(0))
			eq(t, len(c.Routes), 0)
			eq(t, c.Cache.TagHeaders, []string{"Surrogate-Key", "xkey"})
			eq(t, *c.Cache.StripTagHeaders, true)
		}},
		{"tag headers: empty list turns them off, strip can be off", minimal + "cache: {tag_headers: [], strip_tag_headers: false}\n", nil, func(t *testing.T, c *Config) {
			eq(t, c.Cache.TagHeaders != nil && len(c.Cache.TagHeaders) == 0, true)
			eq(t, *c.Cache.StripTagHeaders, false)
		}},
		{"tag headers: own list", minimal + "cache: {tag_headers: [Cache-Tag]}\n", nil, func(t *testing.T, c *Config) {
			eq(t, c.Cache.TagHeaders, []string{"Cache-Tag"})
		}},
		{"l2 and route defaults", `
upstream: {url: "http://up", timeout: 3s}
cache: {l2: {redis: {addrs: ["r:6379"]}}}
routes:
  - {name: u, path: "/u/{id}", ttl: 1m, batch: {path: /u, param: ids, id_field: id}}
  - {name: w, methods: [patch, Delete], path: "/u/{id}"}
`, nil, func(t *testing.T, c *Config) {
			l2 := c.Cache.L2
			eq(t, l2.Redis.Prefix, "sidecache:")
			eq(t, l2.Redis.Timeout.D(), 100*time.Millisecond)
			eq(t, *l2.Lease, true)
			eq(t, l2.LeaseTTL.D(), 3*time.Second)
			eq(t, c.Routes[0].Methods, []string{"GET", "HEAD"})
			eq(t, c.Routes[0].Batch.MaxSize, 100)
			eq(t, c.Routes[0].Batch.MaxWait.D(), 2*time.Millisecond)
			eq(t, c.Routes[1].Methods, []string{"PATCH", "DELETE"})
		}},
		{"explicit zeros kept", minimal + `
cache: {l1: {max_bytes: 0}, l2: {redis: {addrs: ["r:1"], prefix: ""}, lease: false, lease_ttl: 0s}}
shutdown_delay: 5s
`, nil, func(t *testing.T, c *Config) {
			eq(t, c.Cache.L1.MaxBytes, Size(0))
			eq(t, c.Cache.L2.Redis.Prefix, "")
			eq(t, *c.Cache.L2.Lease, false)
			eq(t, c.Cache.L2.LeaseTTL, Duration(0))
			eq(t, c.ShutdownDelay.D(), 5*time.Second)
		}},
		{"null means unset", minimal + "listen:\ncache: {l1: {max_bytes: ~}, l2: null}\n", nil, func(t *testing.T, c *Config) {
			eq(t, c.Listen, "127.0.0.1:8080")
			eq(t, c.Cache.L1.MaxBytes.Bytes(), int64(256<<20))
			eq(t, c.Cache.L2 == nil, true)
		}},
		{"key lists: absent is nil, empty is empty", minimal + `
routes:
  - {name: a, path: /a, ttl: 1s}
  - {name: b, path: /b, ttl: 1s, key: {query: [], headers: [Accept-Language]}}
`, nil, func(t *testing.T, c *Config) {
			eq(t, c.Routes[0].Key.Query == nil, true)
			eq(t, c.Routes[1].Key.Query != nil && len(c.Routes[1].Key.Query) == 0, true)
			eq(t, c.Routes[1].Key.Headers, []string{"Accept-Language"})
		}},
		{"env expansion", `
listen: ${LISTEN}
admin: {listen: "${ADMIN:-127.0.0.1:9999}", token: "${TOKEN}"}
upstream: {url: "${URL:-http://fallback}", timeout: ${EMPTY:-7s}}
cache: {l2: {redis: {addrs: [${REDIS_ADDR:-127.0.0.1:6379}], password: "$${NOT_EXPANDED}"}}}
routes: [{name: "$x", path: /a, ttl: 1s}]
`, map[string]string{"LISTEN": ":8081", "TOKEN": "s3cret", "URL": "https://up.example", "EMPTY": ""},
			func(t *testing.T, c *Config) {
				eq(t, c.Listen, ":8081")
				eq(t, c.Admin.Listen, "127.0.0.1:9999")
				eq(t, c.Admin.Token, "s3cret")
				eq(t, c.Upstream.URL, "https://up.example")
				eq(t, c.Upstream.Timeout.D(), 7*time.Second) // ":-" also replaces an empty value
				eq(t, c.Cache.L2.Redis.Addrs, []string{"127.0.0.1:6379"})
				eq(t, c.Cache.L2.Redis.Password, "${NOT_EXPANDED}")
				eq(t, c.Routes[0].Name, "$x")
			}},
		{"unset var with an empty default is empty", minimal + "admin: {token: ${NOPE:-}}\n", nil, func(t *testing.T, c *Config) {
			eq(t, c.Admin.Token, "")
		}},
		{"set but empty var without default is empty", minimal + "admin: {token: ${E}}\n", map[string]string{"E": ""}, func(t *testing.T, c *Config) {
			eq(t, c.Admin.Token, "")
		}},
		// A Secret made from a file keeps its final newline; quoted, YAML
		// folds it into a trailing space, which no client can send.
		{"token from a Secret with a final newline", minimal + "admin: {token: \"${T}\"}\n", map[string]string{"T": "s3cret\n"}, func(t *testing.T, c *Config) {
			eq(t, c.Admin.Token, "s3cret")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseWithEnv([]byte(tt.yaml), "t.yaml", envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestMergeKeys(t *testing.T) {
	c, err := ParseWithEnv([]byte(minimal+`
routes:
  - &base {name: a, path: /a, ttl: 30s, negative_ttl: 5s}
  - {<<: *base, name: b, path: /b, ttl: 1m}
`), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, c.Routes[1].Name, "b")
	eq(t, c.Routes[1].TTL.D(), time.Minute)
	eq(t, c.Routes[1].NegativeTTL.D(), 5*time.Second)
}

// TestParseErrors covers the rules the golden files do not, one problem
// per case, checking the placed message.
func TestParseErrors(t *testing.T) {
	route := func(s string) string { return minimal + "routes:\n  - " + s + "\n" }
	tests := []struct{ name, yaml, want string }{
		{"empty file", "", "t.yaml: upstream.url: required"},
		{"not a mapping", "hello", "t.yaml:1: expected a mapping, got \"hello\""},
		{"two documents", minimal + "---\nlisten: x\n", "t.yaml:2: only one YAML document is allowed"},
		{"url without host", "upstream: {url: 'http:///x'}", `t.yaml:1: upstream.url: missing host in "http:///x"`},
		{"dial port 0", minimal + "cache: {l2: {redis: {addrs: ['r:0']}}}", `t.yaml:2: cache.l2.redis.addrs[0]: invalid port in "r:0"`},
		{"dial no host", minimal + "cache: {l2: {redis: {addrs: [':6379']}}}", `t.yaml:2: cache.l2.redis.addrs[0]: missing host in ":6379"`},
		{"tag header not a name", minimal + "cache: {tag_headers: ['Surrogate Key']}", `t.yaml:2: cache.tag_headers[0]: invalid header name "Surrogate Key"`},
		{"tag header twice", minimal + "cache: {tag_headers: [xkey, XKey]}", `t.yaml:2: cache.tag_headers[1]: "XKey" listed twice`},
		{"no addrs", minimal + "cache: {l2: {lease: true}}", "t.yaml:2: cache.l2.redis.addrs: must list at least one host:port"},
		{"sentinel and cluster", minimal + "cache: {l2: {redis: {addrs: ['a:1'], master_name: m, cluster: true}}}",
			"t.yaml:2: cache.l2.redis.cluster: cannot be combined with master_name (Sentinel)"},
		{"negative l1", minimal + "cache: {l1: {max_bytes: -1}}", `t.yaml:2: cache.l1.max_bytes: invalid size "-1"`},
		{"timeout 0", minimal + "cache: {l2: {redis: {addrs: ['a:1'], timeout: 0s}}}", "t.yaml:2: cache.l2.redis.timeout: must be > 0"},
		{"ttl missing on caching route", route("{name: a, path: /a}"), "t.yaml:3: routes[0].ttl: must be > 0"},
		{"empty methods", route("{name: a, methods: [], path: /a}"), "t.yaml:3: routes[0].methods: must list at least one method"},
		{"reserved name", route("{name: _pass, path: /a, ttl: 1s}"), `t.yaml:3: routes[0].name: "_pass" is reserved for unmatched requests`},
		{"empty param", route("{name: a, path: '/a/{}', ttl: 1s}"), `t.yaml:3: routes[0].path: invalid pattern "/a/{}": empty param name`},
		{"invalidate param", route("{name: a, methods: [DELETE], path: '/a/{id}', invalidate: ['a:{x}']}"),
			`t.yaml:3: routes[0].invalidate[0]: {x} is not a param of path "/a/{id}"`},
		{"split to itself", route("{name: a, path: /a, split: {param: ids, route: a}}"), "t.yaml:3: routes[0].split.route: must name another route"},
		{"wrong type string", "listen: [a]", `t.yaml:1: listen: expected a string, got a list`},
		{"etag_field is id_field", route("{name: a, path: '/a/{id}', ttl: 1s, batch: {path: /a, param: ids, id_field: id, etag_field: id}}"),
			"t.yaml:3: routes[0].batch.etag_field: must differ from id_field (an ID is not a version)"},
		{"batch path with wildcard", route("{name: a, path: '/a/*', ttl: 1s, batch: {path: /a, param: ids, id_field: id}}"),
			"t.yaml:3: routes[0].path: batch needs exactly one {param} in the path (the ID), found 1"},
		{"targeted_fields outside origin mode", route("{name: a, path: /a, ttl: 1s, targeted_fields: [CDN-Cache-Control]}"),
			"t.yaml:3: routes[0].targeted_fields: only applies with freshness: origin"},
		{"targeted_fields not a field name", route("{name: a, path: /a, freshness: origin, targeted_fields: ['a b']}"),
			`t.yaml:3: routes[0].targeted_fields[0]: "a b" is not a header field name`},
		{"request_no_cache unknown", route("{name: a, path: /a, ttl: 1s, request_no_cache: honor}"),
			`t.yaml:3: routes[0].request_no_cache: must be one of ignore, refresh, got "honor"`},
		{"token with a control character", minimal + `admin: {token: "s3\x01cret"}`, "t.yaml:2: admin.token: must not contain control characters: no Authorization header can carry them"},
		{"empty redact_query name", minimal + "log: {redact_query: [token, ' ']}", "t.yaml:2: log.redact_query[1]: must not be empty"},
		// Issue 21, item 11: an upstream that is the sidecar itself loops.
		{"upstream is the listener", "listen: 127.0.0.1:8080\nupstream: {url: 'http://localhost:8080'}",
			"t.yaml:2: upstream.url: http://localhost:8080 is the sidecar's own listen (127.0.0.1:8080): every request would loop"},
		{"upstream is the admin listener", "admin: {listen: ':9090'}\nupstream: {url: 'http://10.0.0.7:9090/api'}",
			"t.yaml:2: upstream.url: http://10.0.0.7:9090/api is the sidecar's own admin.listen (:9090): every request would loop"},
		{"upgrade h2c", "upstream: {url: 'http://up:3000', allow_upgrades: [websocket, h2c]}", "t.yaml:1: upstream.allow_upgrades[1]: h2c is never forwarded (RFC 9113 §3.1 deprecates it)"},
		{"tunnel_idle_timeout 0", "upstream: {url: 'http://up:3000', allow_upgrades: [websocket], tunnel_idle_timeout: 0s}", "t.yaml:1: upstream.tunnel_idle_timeout: must be > 0"},
		{"negative tunnel_idle_timeout", "upstream: {url: 'http://up:3000', tunnel_idle_timeout: -1s}", `t.yaml:1: upstream.tunnel_idle_timeout: invalid duration "-1s": must not be negative`},
		{"tunnel_idle_timeout not a duration", "upstream: {url: 'http://up:3000', tunnel_idle_timeout: 5}", `t.yaml:1: upstream.tunnel_idle_timeout: invalid duration "5": missing unit, as in "5s"`},
		{"via not a token", minimal + "server: {via: 'a b'}", `t.yaml:2: server.via: must be a token (letters, digits, !#$%&'*+-.^_` + "`" + `|~), got "a b"`},
		{"max_connections 0", minimal + "server: {max_connections: 0}", "t.yaml:2: server.max_connections: must be > 0"},
		{"negative max_connections", minimal + "server: {max_connections: -5}", "t.yaml:2: server.max_connections: must be > 0"},
		{"max_pending_send_bytes 0", minimal + "server: {max_pending_send_bytes: 0}", "t.yaml:2: server.max_pending_send_bytes: must be > 0"},
		{"max_pending_header_bytes 0", minimal + "server: {max_pending_header_bytes: 0}", "t.yaml:2: server.max_pending_header_bytes: must be > 0"},
		{"negative write_timeout", minimal + "server: {write_timeout: -1s}", `t.yaml:2: server.write_timeout: invalid duration "-1s": must not be negative`},
		{"key.host not a host", route("{name: a, path: /a, ttl: 1s, key: {host: 'a/b'}}"), `t.yaml:3: routes[0].key.host: "a/b" is neither request, none nor a host[:port]`},
		{"route self-merge", minimal + "routes: [&r {<<: *r, name: x, path: /x, ttl: 1s}]", "t.yaml:2: routes[0]: merge key refers to itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseWithEnv([]byte(tt.yaml), "t.yaml", noEnv)
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			if !strings.Contains("\n"+err.Error()+"\n", "\n"+tt.want+"\n") {
				t.Errorf("errors:\n%v\nwant a line:\n%s", err, tt.want)
			}
		})
	}
}

func TestValidateInCode(t *testing.T) {
	c, err := ParseWithEnv([]byte(minimal), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	c.Upstream.Timeout = 0
	c.Routes = []Route{{Name: "a", Methods: []string{"GET"}, Path: "/a"}}
	err = c.Validate()
	var list Errors
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	eq(t, err.Error(), "upstream.timeout: must be > 0\nroutes[0].ttl: must be > 0")
	var one *Error
	if !errors.As(err, &one) || one.Path != "upstream.timeout" {
		t.Errorf("errors.As(*Error) = %v", one)
	}
}

func TestExampleConfigs(t *testing.T) {
	for _, file := range []string{"../../config/sidecache.yaml", "../../config/sidecache-redis.yaml"} {
		t.Run(file, func(t *testing.T) {
			t.Setenv("SIDECACHE_ADMIN_TOKEN", "tok")
			t.Setenv("REDIS_ADDR", "")
			c, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range c.Routes {
				names = append(names, r.Name)
			}
			eq(t, names, []string{"client", "client-write", "user", "user-write", "users-list"})
			eq(t, c.Listen, "127.0.0.1:8080")
			eq(t, c.Admin.Listen, "127.0.0.1:9090")
			eq(t, c.Admin.Token, "tok")
			eq(t, c.Upstream.URL, "http://127.0.0.1:3000")
			u := c.Routes[2]
			eq(t, u.Methods, []string{"GET", "HEAD"})
			eq(t, *u.Batch, Batch{Path: "/users", Param: "ids", MaxSize: 100, MaxWait: Duration(2 * time.Millisecond), IDField: "id", MaxInFlight: 2, MaxRouteInFlight: 8})
			eq(t, *c.Routes[4].Split, Split{Param: "ids", Route: "user", MaxIDs: 1000})
			eq(t, c.Routes[0].StaleIfError.D(), 10*time.Minute)
			if strings.Contains(file, "redis") {
				eq(t, c.Cache.L2.Redis.Addrs, []string{"127.0.0.1:6379"})
			} else {
				eq(t, c.Cache.L2 == nil, true)
			}
		})
	}
	if _, err := Load("../../config/missing.yaml"); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		str  string
	}{
		{"0", 0, "0"}, {"1000", 1000, "1000"}, {"512B", 512, "512"}, {"1024", 1024, "1KiB"},
		{"64KiB", 64 << 10, "64KiB"}, {"8 MiB", 8 << 20, "8MiB"}, {"8mib", 8 << 20, "8MiB"},
		{"1536MiB", 1536 << 20, "1536MiB"}, {"2GiB", 2 << 30, "2GiB"}, {"3TiB", 3 << 40, "3TiB"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s Size
			if err := s.UnmarshalText([]byte(tt.in)); err != nil {
				t.Fatal(err)
			}
			eq(t, s, tt.want)
			eq(t, s.String(), tt.str)
			var back Size
			if err := back.UnmarshalText([]byte(s.String())); err != nil || back != s {
				t.Errorf("round trip %q -> %v, %v", s.String(), back, err)
			}
		})
	}
	for _, bad := range []string{"", "-1", "1.5MiB", "8MB", "8KB", "1XiB", "MiB", "9223372036854775807KiB", "1 2"} {
		var s Size
		if err := s.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("parseSize(%q) = %v, want error", bad, s)
		}
	}
}

func TestDuration(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("250ms")); err != nil {
		t.Fatal(err)
	}
	eq(t, d.D(), 250*time.Millisecond)
	eq(t, d.String(), "250ms")
	b, _ := Duration(5 * time.Minute).MarshalText()
	eq(t, string(b), "5m0s")
	for _, bad := range []string{"", "5x", "-1s", "10"} {
		if err := d.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("parseDuration(%q) succeeded", bad)
		}
	}
}

func TestExpandEnv(t *testing.T) {
	env := envOf(map[string]string{"A": "x", "E": ""})
	tests := []struct{ in, want string }{
		{"${A}", "x"}, {"${E}", ""}, {"${B:-}", ""}, {"${B:-d}", "d"}, {"${E:-d}", "d"}, {"${A:-d}", "x"},
		{"$${A}", "${A}"}, {"$A $", "$A $"}, {"${B:-a:-b}", "a:-b"}, {"p${A}q${A}", "pxqx"},
	}
	for _, tt := range tests {
		got, errs := expandEnv([]byte(tt.in), env)
		if string(got) != tt.want || errs != nil {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", tt.in, got, errs, tt.want)
		}
	}
	for _, bad := range []string{"${", "${A", "${}", "${1A}", "${A\n}", "${B}"} {
		if _, errs := expandEnv([]byte(bad), env); len(errs) != 1 {
			t.Errorf("expandEnv(%q): %d errors, want 1", bad, len(errs))
		}
	}
}

func eq[T any](t *testing.T, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

// TestAliasBomb: merge keys can name a subtree exponentially often; the
// walk must give up with an error instead of running for hours.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString(minimal + "routes:\n  - &l0 {name: x, path: /x, ttl: 1s, tags: [a, b, c, d, e, f, g, h, i, j]}\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "  - &l%d {<<: [", i)
		for j := 0; j < 10; j++ {
			fmt.Fprintf(&b, "*l%d, ", i-1)
		}
		b.WriteString("]}\n")
	}
	_, err := ParseWithEnv([]byte(b.String()), "t.yaml", noEnv)
	if err == nil || !strings.Contains(err.Error(), "aliases too much") {
		t.Fatalf("want the size limit error, got %v", err)
	}
}
