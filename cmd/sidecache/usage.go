package main

import (
	"flag"
	"fmt"
)

// docsIndex names the reference pages of the repository, so that -help
// points an operator at the documentation rather than at the flags alone.
// TestHelpNamesDocs checks that each page exists.
const docsIndex = `Documentation (in the sidecache repository):
  README.md               overview, quick start, failure modes
  docs/configuration.md   every config field: type, default, reload behaviour
  docs/admin-api.md       /metrics, /healthz, /readyz, /routes, /cache, POST /purge, pprof, sidecache admin
  docs/metrics.md         every metric, its labels, what to alert on
  docs/tracing.md         OpenTelemetry traces, on with OTEL_EXPORTER_OTLP_ENDPOINT
`

// usage prints the command line, the documentation index and the flags.
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage:\n")
	fmt.Fprintf(w, "  sidecache -config PATH          run (default PATH: config/sidecache.yaml)\n")
	fmt.Fprintf(w, "  sidecache -config PATH -check   validate the config, print every problem, exit 0 or 1\n")
	fmt.Fprintf(w, "  sidecache -version\n")
	fmt.Fprintf(w, "  sidecache admin routes|ready|inspect URL|purge -tag T   the admin API (sidecache admin -h)\n\n")
	fmt.Fprint(w, docsIndex)
	fmt.Fprintf(w, "\nFlags:\n")
	fs.PrintDefaults()
}
