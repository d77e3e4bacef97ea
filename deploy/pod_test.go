package deploy

import (
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sidecache/sidecache/internal/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// sidecarName is the sidecar's container name in the pod.
const sidecarName = "sidecache"

// sidecar returns the sidecache container of d's pod, wherever it is.
func sidecar(d *appsv1.Deployment) *corev1.Container {
	spec := &d.Spec.Template.Spec
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == sidecarName {
			return &spec.InitContainers[i]
		}
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == sidecarName {
			return &spec.Containers[i]
		}
	}
	return nil
}

func envByName(env []corev1.EnvVar) map[string]*corev1.EnvVar {
	m := make(map[string]*corev1.EnvVar, len(env))
	for i := range env {
		m[env[i].Name] = &env[i]
	}
	return m
}

// configPath is the file the sidecar is told to read: the value after
// -config in its args.
func configPath(c *corev1.Container) (string, bool) {
	args := slices.Concat(c.Command, c.Args)
	for i, a := range args {
		if (a == "-config" || a == "--config") && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "-config="); ok {
			return v, true
		}
	}
	return "", false
}

// configMapOf finds the ConfigMap behind the sidecar's config file: the
// volume mounted at the file's directory. It fails the test when the mount
// is not a plain directory mount of a rendered ConfigMap holding the file.
func configMapOf(t *testing.T, r *rendered, d *appsv1.Deployment) (*corev1.ConfigMap, string) {
	t.Helper()
	c := sidecar(d)
	file, ok := configPath(c)
	if !ok {
		t.Fatalf("sidecar args %q have no -config", c.Args)
	}
	if !path.IsAbs(file) {
		t.Fatalf("-config %q is relative; the image's working directory is not part of the contract", file)
	}
	dir, key := path.Dir(file), path.Base(file)
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if path.Clean(c.VolumeMounts[i].MountPath) == dir {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("no volume mounted at %s, the directory of -config %s", dir, file)
	}
	// A subPath mount is a bind of one file: the kubelet never updates it,
	// so the sidecar's watcher would never see a ConfigMap change.
	if mount.SubPath != "" || mount.SubPathExpr != "" {
		t.Errorf("config volume %s uses subPath; mount the directory so updates reach the sidecar", mount.Name)
	}
	if !mount.ReadOnly {
		t.Errorf("config volume %s is not mounted readOnly", mount.Name)
	}
	var vol *corev1.Volume
	for i := range d.Spec.Template.Spec.Volumes {
		if d.Spec.Template.Spec.Volumes[i].Name == mount.Name {
			vol = &d.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap == nil {
		t.Fatalf("volume %s is missing or not a ConfigMap volume", mount.Name)
	}
	if len(vol.ConfigMap.Items) > 0 {
		t.Errorf("ConfigMap volume %s selects items; the file must appear under its key %s", vol.Name, key)
	}
	for i := range r.configMaps {
		cm := &r.configMaps[i]
		if cm.Name != vol.ConfigMap.Name {
			continue
		}
		data, ok := cm.Data[key]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s (keys: %v)", cm.Name, key, keys(cm.Data))
		}
		return cm, data
	}
	t.Fatalf("volume %s refers to ConfigMap %q, which the kustomization does not render (is its configMapGenerator missing?)",
		vol.Name, vol.ConfigMap.Name)
	return nil, ""
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// envRef matches the ${NAME} and ${NAME:-default} references of the
// config file (README.md, sidecache -help).
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// kubeletRef matches the $(NAME) references the kubelet expands in env
// values, args and command.
var kubeletRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// sidecarConfig loads the rendered sidecar config with sidecache's own
// loader, as the sidecar will at start. Each ${VAR} is looked up in the
// container's env: a value the manifest states is used as is, one that
// comes from a Secret or the downward API gets a stand-in. A variable the
// container does not define at all fails the test: in the pod it would
// silently be empty.
func sidecarConfig(t *testing.T, r *rendered, d *appsv1.Deployment) *config.Config {
	t.Helper()
	cm, data := configMapOf(t, r, d)
	env := envByName(sidecar(d).Env)
	for _, m := range envRef.FindAllStringSubmatch(data, -1) {
		if env[m[1]] == nil {
			t.Errorf("config refers to ${%s}, which the sidecar container's env does not define", m[1])
		}
	}
	lookup := func(name string) (string, bool) {
		e := env[name]
		if e == nil {
			return "", false
		}
		if e.ValueFrom != nil {
			return "from-" + name, true
		}
		return e.Value, true
	}
	file, _ := configPath(sidecar(d))
	cfg, err := config.ParseWithEnv([]byte(data), cm.Name+":"+file, lookup)
	if err != nil {
		t.Fatalf("sidecar config does not load:\n%v", err)
	}
	return cfg
}

// port returns the port of a host:port listen address.
func port(t *testing.T, field, addr string) int32 {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", field, addr, err)
	}
	// Inside a pod, the kubelet (probes), Prometheus and the Service all
	// connect to the pod IP: a loopback listener would be unreachable.
	if host != "" && host != "0.0.0.0" && host != "::" {
		t.Errorf("%s %q listens on %s only; the kubelet, Prometheus and the Service reach the pod IP", field, addr, host)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		t.Fatalf("%s %q: bad port: %v", field, addr, err)
	}
	return int32(n)
}

// containerPort resolves a port given by number or by name against c's
// declared ports, as the kubelet does for probes.
func containerPort(t *testing.T, c *corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Errorf("container %s has no port named %q", c.Name, p.StrVal)
	return -1
}

// portNamed returns c's port with that number, failing if undeclared.
func portNamed(t *testing.T, c *corev1.Container, n int32) string {
	t.Helper()
	for _, cp := range c.Ports {
		if cp.ContainerPort == n {
			return cp.Name
		}
	}
	t.Errorf("container %s does not declare port %d", c.Name, n)
	return ""
}

// checkPod holds every agreement between the sidecar container, the pod
// around it, the Service in front, the scrape settings and the sidecar's
// own config.
func checkPod(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	pod := &d.Spec.Template
	c := sidecar(d)
	cfg := sidecarConfig(t, r, d)
	proxyPort := port(t, "listen", cfg.Listen)
	adminPort := port(t, "admin.listen", cfg.Admin.Listen)

	// Native sidecar: an init container that keeps running (KEP-753), so
	// it starts before the app and stops after it.
	if slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == sidecarName }) {
		t.Errorf("sidecar is a regular container; want an initContainer with restartPolicy Always")
	}
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("sidecar restartPolicy = %v, want Always (native sidecar)", c.RestartPolicy)
	}

	// Ports, as the config has them.
	portNamed(t, c, proxyPort)
	adminName := portNamed(t, c, adminPort)

	// The admin listener is on the pod network for the kubelet's probes and
	// Prometheus, nothing more: profiling stays off, no port is bound on the
	// node (hostPort), and (below) no Service exposes it. Purge needs the
	// token wherever it is reached from.
	if cfg.Admin.PProf {
		t.Error("admin.pprof is on: profiles would be served on the pod network")
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			t.Errorf("sidecar port %s is bound on the node (hostPort %d)", p.Name, p.HostPort)
		}
	}

	// Probes on the admin listener.
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("sidecar has no HTTP %s probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe path = %q, want %q", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := containerPort(t, c, p.probe.HTTPGet.Port); got != adminPort {
			t.Errorf("%s probe port = %d, want admin.listen's %d", p.name, got, adminPort)
		}
	}

	// Shutdown: readiness must turn false within shutdown_delay, and the
	// grace period must cover the app's preStop, the delay and the drain.
	delay, drain := cfg.ShutdownDelay.D(), cfg.ShutdownTimeout.D()
	if delay != 5*time.Second {
		t.Errorf("shutdown_delay = %v, want 5s", delay)
	}
	if rp := c.ReadinessProbe; rp != nil {
		notice := time.Duration(rp.PeriodSeconds*max(rp.FailureThreshold, 1)) * time.Second
		if notice >= delay {
			t.Errorf("readiness probe notices shutdown after %v, not within shutdown_delay %v", notice, delay)
		}
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	var preStop time.Duration
	for _, app := range pod.Spec.Containers {
		if app.Lifecycle != nil && app.Lifecycle.PreStop != nil && app.Lifecycle.PreStop.Sleep != nil {
			preStop = max(preStop, time.Duration(app.Lifecycle.PreStop.Sleep.Seconds)*time.Second)
		}
	}
	if need := preStop + delay + drain; time.Duration(grace)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds = %d, less than app preStop %v + shutdown_delay %v + shutdown_timeout %v",
			grace, preStop, delay, drain)
	}

	// Hardening.
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("sidecar has no securityContext")
	default:
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("sidecar securityContext.runAsNonRoot is not true")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("sidecar runs as uid 0")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("sidecar securityContext.readOnlyRootFilesystem is not true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("sidecar securityContext.allowPrivilegeEscalation is not false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("sidecar is privileged")
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("sidecar capabilities = %+v, want drop [ALL] and add none", sc.Capabilities)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil && pod.Spec.SecurityContext != nil {
			seccomp = pod.Spec.SecurityContext.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("sidecar seccompProfile = %+v, want RuntimeDefault", seccomp)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("sidecar resources = %+v; want cpu and memory requests and a memory limit", c.Resources)
	}
	if l1, limit := cfg.Cache.L1.MaxBytes.Bytes(), c.Resources.Limits.Memory().Value(); limit > 0 && l1 > limit*3/4 {
		t.Errorf("cache.l1.max_bytes %d leaves under a quarter of the memory limit %d for bodies and the runtime", l1, limit)
	}

	// Env: a $(VAR) in a value must name a variable defined before it, or
	// the kubelet leaves the text as it is.
	seen := map[string]bool{}
	for _, e := range c.Env {
		for _, m := range kubeletRef.FindAllStringSubmatch(e.Value, -1) {
			if !seen[m[1]] {
				t.Errorf("env %s refers to $(%s) before it is defined", e.Name, m[1])
			}
		}
		seen[e.Name] = true
	}
	checkRefs(t, r, pod)

	// Upstream: the app container, over loopback.
	u, err := url.Parse(cfg.Upstream.URL)
	if err != nil {
		t.Fatalf("upstream.url: %v", err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		t.Errorf("upstream.url host %q; in a pod the app is on loopback", h)
	}
	up, _ := strconv.Atoi(u.Port())
	appHasPort := false
	for i := range pod.Spec.Containers {
		app := &pod.Spec.Containers[i]
		for _, cp := range app.Ports {
			appHasPort = appHasPort || cp.ContainerPort == int32(up)
		}
		// The example app is the demo upstream; its -listen is the port.
		for j, a := range app.Args {
			if a == "-listen" && j+1 < len(app.Args) {
				if _, p, _ := net.SplitHostPort(app.Args[j+1]); p != u.Port() {
					t.Errorf("app %s listens on %s but upstream.url is %s", app.Name, app.Args[j+1], cfg.Upstream.URL)
				}
			}
		}
		// The demo app runs the demo image of the sidecar's version; the
		// production image has no demo-upstream.
		if strings.Contains(strings.Join(app.Command, " "), "demo-upstream") {
			repo, tag, _ := strings.Cut(app.Image, ":")
			sRepo, sTag, _ := strings.Cut(c.Image, ":")
			if repo != sRepo+"-demo" || tag != sTag {
				t.Errorf("demo app image %q, want the demo image of the sidecar's %q (%s-demo:%s)", app.Image, c.Image, sRepo, sTag)
			}
		}
	}
	if !appHasPort {
		t.Errorf("upstream.url %s: no app container declares port %d", cfg.Upstream.URL, up)
	}

	// Service: every annotated Service selecting this pod sends its first
	// port to the sidecar's proxy listener.
	selected := 0
	for i := range r.services {
		s := &r.services[i]
		if s.Annotations[injectAnnotation] != "true" || len(s.Spec.Selector) == 0 ||
			!labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			continue
		}
		selected++
		if got := containerPort(t, c, s.Spec.Ports[0].TargetPort); got != proxyPort {
			t.Errorf("service %s port %d targets %d, want the sidecar's listen port %d",
				s.Name, s.Spec.Ports[0].Port, got, proxyPort)
		}
		for _, sp := range s.Spec.Ports {
			if sp.TargetPort.String() == adminName || sp.TargetPort.IntVal == adminPort {
				t.Errorf("service %s exposes the admin port", s.Name)
			}
		}
	}
	if selected == 0 {
		t.Errorf("no Service annotated %s selects the pod", injectAnnotation)
	}

	// Scraping: annotations for plain Prometheus, PodMonitor for the
	// Operator, both on the admin listener.
	a := pod.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" ||
		a["prometheus.io/port"] != strconv.Itoa(int(adminPort)) {
		t.Errorf("scrape annotations = scrape:%q path:%q port:%q, want true, /metrics, %d",
			a["prometheus.io/scrape"], a["prometheus.io/path"], a["prometheus.io/port"], adminPort)
	}
	for _, pm := range r.podMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil {
			t.Errorf("podmonitor %s: %v", pm.Name, err)
			continue
		}
		if !sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("podmonitor %s selector %s does not select the pod (labels %v)", pm.Name, sel, pod.Labels)
		}
		if len(pm.Spec.PodMetricsEndpoints) == 0 {
			t.Errorf("podmonitor %s has no endpoints", pm.Name)
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Port != adminName || ep.Path != "/metrics" {
				t.Errorf("podmonitor %s endpoint %s%s, want port %s path /metrics", pm.Name, ep.Port, ep.Path, adminName)
			}
		}
	}

	// L2 in the same kustomization: the address must be a rendered
	// Service's name and port.
	if cfg.Cache.L2 != nil {
		for _, addr := range cfg.Cache.L2.Redis.Addrs {
			host, p, err := net.SplitHostPort(addr)
			if err != nil {
				t.Errorf("cache.l2.redis.addrs %q: %v", addr, err)
				continue
			}
			if strings.Contains(host, ".") {
				continue // outside this kustomization
			}
			if !serviceHasPort(r, host, p) {
				t.Errorf("cache.l2.redis.addrs %q: no rendered Service %s with port %s", addr, host, p)
			}
		}
	}
}

func serviceHasPort(r *rendered, name, p string) bool {
	for _, s := range r.services {
		if s.Name != name {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if strconv.Itoa(int(sp.Port)) == p {
				return true
			}
		}
	}
	return false
}

// checkRefs catches a Secret or ConfigMap reference that kustomize did not
// rewrite to a generated object's hashed name: the pod would wait forever
// for an object that never exists. References to objects managed outside
// the kustomization (none of its objects carries the name) are fine.
func checkRefs(t *testing.T, r *rendered, pod *corev1.PodTemplateSpec) {
	t.Helper()
	var secrets, configMaps []string
	for _, s := range r.secrets {
		secrets = append(secrets, s.Name)
	}
	for _, cm := range r.configMaps {
		configMaps = append(configMaps, cm.Name)
	}
	check := func(kind, name string, have []string) {
		if slices.Contains(have, name) {
			return
		}
		for _, h := range have {
			if strings.HasPrefix(h, name+"-") {
				t.Errorf("reference to %s %q was not rewritten to the generated %q", kind, name, h)
			}
		}
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if ref := e.ValueFrom.SecretKeyRef; ref != nil {
				check("Secret", ref.Name, secrets)
			}
			if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
				check("ConfigMap", ref.Name, configMaps)
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			check("ConfigMap", v.ConfigMap.Name, configMaps)
		}
		if v.Secret != nil {
			check("Secret", v.Secret.SecretName, secrets)
		}
	}
}
