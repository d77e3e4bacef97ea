package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAdminCLI (issue 22, item 2): `sidecache admin` reads the admin
// address's token from the config and answers routes, inspect and purge
// against a running sidecar, as an operator would run it with kubectl exec.
func TestAdminCLI(t *testing.T) {
	_, up := startDemo(t)
	cfg := writeFile(t, filepath.Join(t.TempDir(), "sidecache.yaml"),
		strings.Replace(fmt.Sprintf(configTmpl, up, "5m"), "  listen: 127.0.0.1:0\n", "  listen: 127.0.0.1:0\n  token: ${CLI_TEST_TOKEN:-tok}\n", 1))
	sc := startSidecache(t, cfg)
	admin := func(args ...string) (int, string, string) {
		t.Helper()
		return runBinary(t, append([]string{"admin", "-config", cfg, "-admin", sc.admin}, args...)...)
	}

	code, out, errOut := admin("routes")
	var routes []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &routes) != nil || len(routes) != 2 || routes[0]["name"] != "client" {
		t.Fatalf("admin routes: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	c := &http.Client{Timeout: 10 * time.Second}
	if r := get(t, c, sc.proxy+"/clients/1"); r.code != 200 {
		t.Fatalf("GET /clients/1: %d", r.code)
	}
	target := sc.proxy + "/clients/1"
	var v map[string]any
	deadline := time.Now().Add(within)
	for {
		code, out, errOut = admin("inspect", target)
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("admin inspect: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if v["cached"] == true || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v["cached"] != true || v["route"] != "client" {
		t.Fatalf("admin inspect %s: %v", target, v)
	}

	if code, out, errOut = admin("purge", "-tag", "client:1"); code != 0 || !strings.Contains(out, `"purged": 1`) {
		t.Fatalf("admin purge -tag: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut = admin("purge", "-route", "nosuch"); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("admin purge -route nosuch: exit %d, stderr %q; want 1 and the 404", code, errOut)
	}
	if code, _, errOut = runBinary(t, "admin", "-config", cfg, "-admin", sc.admin, "-token", "wrong", "routes"); code != 0 {
		t.Errorf("routes needs no token: exit %d, %q", code, errOut)
	}
	if code, _, errOut = runBinary(t, "admin", "-config", cfg, "-admin", sc.admin, "-token", "wrong", "purge", "-all"); code != 1 || !strings.Contains(errOut, "401") {
		t.Errorf("purge with a wrong token: exit %d, %q; want 1 and the 401", code, errOut)
	}
}
