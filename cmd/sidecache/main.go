// Command sidecache is the caching sidecar. See README.md and docs/.
//
//	sidecache -config PATH        run (default config/sidecache.yaml)
//	sidecache -config PATH -check validate the config, print problems, exit 0/1
//	sidecache -version
//	sidecache admin COMMAND       the admin API from the pod (admin.go)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/sidecache/sidecache/internal/config"
	"github.com/sidecache/sidecache/internal/server"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	applyRuntimeDefaults()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "admin" {
		return runAdmin(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("sidecache", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	path := fs.String("config", "config/sidecache.yaml", "config file")
	check := fs.Bool("check", false, "validate the config, print every problem, and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	logLevel := fs.String("log-level", "", "debug, info, warn or error: overrides log.level, which a reload then leaves alone")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "sidecache %s %s\n", version, runtime.Version())
		return 0
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "sidecache: invalid config:\n%s\n", indent(err))
		return 1
	}
	warnings := cfg.Warnings()
	if *check {
		for _, w := range warnings {
			fmt.Fprintf(stdout, "warning: %s\n", w)
		}
		fmt.Fprintf(stdout, "%s: ok (%d routes)\n", *path, len(cfg.Routes))
		return 0
	}
	// The process log goes to stderr at a level a reload can change; the
	// access log (log.access) to stdout at info, whatever log.level says,
	// as NGINX keeps its error and access logs apart.
	level := new(slog.LevelVar)
	reloadLevel := level
	name := cfg.Log.Level
	if *logLevel != "" {
		name, reloadLevel = *logLevel, nil
	}
	if err := level.UnmarshalText([]byte(name)); err != nil {
		fmt.Fprintf(stderr, "sidecache: -log-level: %v\n", err)
		return 2
	}
	log := server.NewLogger(stderr, cfg.Log.Format, level)
	access := server.NewLogger(stdout, cfg.Log.Format, slog.LevelInfo)
	for _, w := range warnings {
		log.Warn("config: " + w)
	}
	// What the runtime defaults (gc.go) left in force, for the operator who
	// wonders why the sidecar never uses a second core.
	log.Info("runtime", runtimeAttrs(runtime.GOMAXPROCS(0), debug.SetMemoryLimit(-1), os.Getenv)...)
	// go-redis logs dial failures through a process-wide logger; during an
	// outage that is one line per attempt, which the breaker already
	// reports once. Keep them, at debug level.
	redis.SetLogger(redisLogger{log.With("component", "redis")})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.New(ctx, cfg, server.Options{
		ConfigPath: *path, Version: version, Logger: log, Level: reloadLevel, AccessLog: access,
	})
	if err != nil {
		log.Error("start", "err", err)
		return 1
	}
	if err := srv.Listen(); err != nil {
		log.Error("start", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			_ = srv.Reload() // logged and counted inside
		}
	}()
	if err := srv.Run(ctx); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, fmt.Sprintf(format, v...))
}

// indent prints each joined problem on its own line.
func indent(err error) string {
	var multi interface{ Unwrap() []error }
	if errors.As(err, &multi) {
		s := ""
		for _, e := range multi.Unwrap() {
			s += "  " + e.Error() + "\n"
		}
		return s
	}
	return "  " + err.Error()
}
