package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sidecache/sidecache/internal/config"
)

// defaultConfigPaths are where the admin CLI looks for the running
// process's config (its admin.listen and admin.token): the repository's
// default, then the path the Kubernetes component mounts, so that
// `kubectl exec POD -c sidecache -- sidecache admin routes` needs no flags.
var defaultConfigPaths = []string{"config/sidecache.yaml", "/etc/sidecache/sidecache.yaml"}

const adminUsage = `Usage:
  sidecache admin [-config PATH] [-admin URL] [-token T] COMMAND

Commands (the admin API, docs/admin-api.md):
  routes                          the routes in effect (GET /routes)
  ready                           readiness and its parts (GET /readyz)
  inspect [-H 'Name: v']... URL   what the cache holds for URL (GET /cache)
  purge -tag T | -key K | -route R | -url U | -all
                                  drop entries on every replica (POST /purge)

The admin address and token come from the config's admin.listen and
admin.token (with ${VAR} expanded from this environment, as the server
does), unless -admin or -token say otherwise.
`

// runAdmin is `sidecache admin …`: a client of the admin API, for an
// operator in the pod (kubectl exec), as varnishadm is for Varnish.
func runAdmin(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sidecache admin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage); fs.PrintDefaults() }
	path := fs.String("config", "", "config file to read admin.listen and admin.token from (default: "+strings.Join(defaultConfigPaths, ", then ")+")")
	addr := fs.String("admin", "", "admin base URL (default: http:// + admin.listen, or http://127.0.0.1:9090)")
	token := fs.String("token", "", "bearer token (default: admin.token, or $SIDECACHE_ADMIN_TOKEN)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	base, tok, err := adminTarget(*path, *addr, *token)
	if err != nil {
		fmt.Fprintf(stderr, "sidecache admin: %v\n", err)
		return 1
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	var method, target string
	switch cmd {
	case "routes":
		method, target = http.MethodGet, base+"/routes"
	case "ready":
		method, target = http.MethodGet, base+"/readyz"
	case "inspect":
		q, err := inspectQuery(rest, stderr)
		if err != nil {
			return 2
		}
		method, target = http.MethodGet, base+"/cache?"+q
	case "purge":
		q, err := purgeQuery(rest, stderr)
		if err != nil {
			return 2
		}
		method, target = http.MethodPost, base+"/purge?"+q
	default:
		fmt.Fprintf(stderr, "sidecache admin: unknown command %q\n\n", cmd)
		fs.Usage()
		return 2
	}
	return adminCall(method, target, tok, stdout, stderr)
}

// adminTarget finds the admin base URL and token: flags first, then the
// config file, then the defaults.
func adminTarget(path, addr, token string) (string, string, error) {
	paths := defaultConfigPaths
	if path != "" {
		paths = []string{path}
	}
	var cfg *config.Config
	for _, p := range paths {
		c, err := config.Load(p)
		if err == nil {
			cfg = c
			break
		}
		if path != "" {
			return "", "", fmt.Errorf("config: %w", err)
		}
	}
	if addr == "" {
		addr = "http://127.0.0.1:9090"
		if cfg != nil {
			addr = "http://" + dialable(cfg.Admin.Listen)
		}
	}
	if token == "" && cfg != nil {
		token = cfg.Admin.Token
	}
	if token == "" {
		token = os.Getenv("SIDECACHE_ADMIN_TOKEN")
	}
	return strings.TrimSuffix(addr, "/"), token, nil
}

// dialable turns a listen address into one to dial: an unspecified host
// (":9090", "0.0.0.0:9090", "[::]:9090") is this host's loopback.
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// headerFlags collects repeated -H values.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

func inspectQuery(args []string, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet("sidecache admin inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var hdrs headerFlags
	fs.Var(&hdrs, "H", "a request header that picks the key or variant, 'Name: value' (repeatable)")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "sidecache admin inspect: want one URL, e.g. http://clients.svc/clients/42")
		return "", errors.New("usage")
	}
	q := url.Values{"url": {fs.Arg(0)}}
	for _, h := range hdrs {
		q.Add("header", h)
	}
	return q.Encode(), nil
}

func purgeQuery(args []string, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet("sidecache admin purge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tag := fs.String("tag", "", "every entry with this tag")
	key := fs.String("key", "", "the one entry under this cache key")
	route := fs.String("route", "", "every entry of this route")
	u := fs.String("url", "", "every entry of this URL's path (hosts, queries, variants)")
	all := fs.Bool("all", false, "everything")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	q := url.Values{}
	for name, v := range map[string]string{"tag": *tag, "key": *key, "route": *route, "url": *u} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if *all {
		q.Set("all", "1")
	}
	if len(q) != 1 || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "sidecache admin purge: want exactly one of -tag, -key, -route, -url, -all")
		return "", errors.New("usage")
	}
	return q.Encode(), nil
}

// adminCall makes one call and prints the answer: JSON indented on stdout
// for a 2xx (exit 0), the status and body on stderr otherwise (exit 1).
func adminCall(method, target, token string, stdout, stderr io.Writer) int {
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		fmt.Fprintf(stderr, "sidecache admin: %v\n", err)
		return 1
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "sidecache admin: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		fmt.Fprintf(stderr, "sidecache admin: read: %v\n", err)
		return 1
	}
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "sidecache admin: %s %s: %s: %s\n", method, req.URL.Path, resp.Status, bytes.TrimSpace(body))
		return 1
	}
	var out bytes.Buffer
	if json.Indent(&out, body, "", "  ") != nil {
		out.Reset()
		out.Write(body)
	}
	fmt.Fprintln(stdout, strings.TrimRight(out.String(), "\n"))
	return 0
}
