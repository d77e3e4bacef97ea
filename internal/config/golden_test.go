package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden from the current output")

func noEnv(string) (string, bool) { return "", false }

// TestBadConfigs pins the exact text an operator sees for each broken file,
// so a change in wording or in what gets reported shows up in review.
func TestBadConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) < 8 {
		t.Fatalf("want at least 8 bad configs, got %d (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ParseWithEnv(data, file, noEnv)
			if err == nil {
				t.Fatalf("parsed without error: %+v", cfg)
			}
			if cfg != nil {
				t.Error("non-nil Config returned with an error")
			}
			var list Errors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is %T, want a non-empty Errors", err)
			}
			for _, e := range list {
				if e.File != file || e.Msg == "" {
					t.Errorf("badly placed error %#v", e)
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bad/*.yaml")
	seeds = append(seeds, "../../config/sidecache.yaml", "../../config/sidecache-redis.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: &a {<<: *a}\nroutes: [*a]"))
	f.Add([]byte("routes: &r [{name: x, <<: *r}]"))
	f.Add([]byte("upstream: {url: 'http://h', timeout: ${X:-1s}}\n---\nx: 1"))
	f.Add([]byte("routes: [{path: '/{a:{}}/*', tags: ['{*}']}]"))
	f.Add([]byte("upstream: {url: 'http://h', allow_upgrades: [websocket], tunnel_idle_timeout: 90s}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		env := func(name string) (string, bool) { return name, len(name)%2 == 0 }
		cfg, err := ParseWithEnv(data, "fuzz.yaml", env)
		if err != nil {
			var list Errors
			if cfg != nil || !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("bad error result: cfg=%v err=%#v", cfg, err)
			}
			_ = err.Error()
			return
		}
		// Whatever Parse accepts, Validate must accept again.
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed config fails Validate: %v", err)
		}
	})
}
