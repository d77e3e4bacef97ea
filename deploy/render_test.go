package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Where the artefacts live, relative to this directory.
const (
	componentDir  = "kubernetes/components/sidecache"
	monitoringDir = "kubernetes/components/monitoring"
	exampleBase   = "kubernetes/example/base"
	starterConfig = "kubernetes/sidecache.yaml"
)

// injectAnnotation marks the Deployment and Service the component patches.
const injectAnnotation = "sidecache.io/inject"

// rendered is one kustomization's output, decoded into typed objects.
type rendered struct {
	deployments     []appsv1.Deployment
	statefulSets    []appsv1.StatefulSet
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	secrets         []corev1.Secret
	namespaces      []corev1.Namespace
	pdbs            []policyv1.PodDisruptionBudget
	netpols         []networkingv1.NetworkPolicy
	podMonitors     []podMonitor
	prometheusRules []prometheusRule
}

// podMonitor is the part of the Prometheus Operator's PodMonitor this
// repository uses; decoding into it strictly rejects anything else, so a
// typo in a field name fails here rather than being ignored by the CRD.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// prometheusRule is the Prometheus Operator's PrometheusRule.
type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleFile `json:"spec"`
}

// render builds the kustomization in dir as `kustomize build dir` would
// and decodes every object strictly: an unknown field, or a kind this test
// does not know, fails the test.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := &rendered{}
	for _, res := range m.Resources() {
		js, err := res.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: %s: marshal: %v", dir, res.CurId(), err)
		}
		gvk := res.GetGvk()
		var target any
		switch gv := gvk.ApiVersion() + "/" + gvk.Kind; gv {
		case "apps/v1/Deployment":
			out.deployments = append(out.deployments, appsv1.Deployment{})
			target = &out.deployments[len(out.deployments)-1]
		case "apps/v1/StatefulSet":
			out.statefulSets = append(out.statefulSets, appsv1.StatefulSet{})
			target = &out.statefulSets[len(out.statefulSets)-1]
		case "v1/Service":
			out.services = append(out.services, corev1.Service{})
			target = &out.services[len(out.services)-1]
		case "v1/ConfigMap":
			out.configMaps = append(out.configMaps, corev1.ConfigMap{})
			target = &out.configMaps[len(out.configMaps)-1]
		case "v1/Secret":
			out.secrets = append(out.secrets, corev1.Secret{})
			target = &out.secrets[len(out.secrets)-1]
		case "v1/Namespace":
			out.namespaces = append(out.namespaces, corev1.Namespace{})
			target = &out.namespaces[len(out.namespaces)-1]
		case "policy/v1/PodDisruptionBudget":
			out.pdbs = append(out.pdbs, policyv1.PodDisruptionBudget{})
			target = &out.pdbs[len(out.pdbs)-1]
		case "networking.k8s.io/v1/NetworkPolicy":
			out.netpols = append(out.netpols, networkingv1.NetworkPolicy{})
			target = &out.netpols[len(out.netpols)-1]
		case "monitoring.coreos.com/v1/PodMonitor":
			out.podMonitors = append(out.podMonitors, podMonitor{})
			target = &out.podMonitors[len(out.podMonitors)-1]
		case "monitoring.coreos.com/v1/PrometheusRule":
			out.prometheusRules = append(out.prometheusRules, prometheusRule{})
			target = &out.prometheusRules[len(out.prometheusRules)-1]
		default:
			t.Errorf("%s: %s: kind %s is not known to this test; add it to render", dir, res.CurId(), gv)
			continue
		}
		if err := decodeStrict(js, target); err != nil {
			t.Errorf("%s: %s: %v", dir, res.CurId(), err)
		}
	}
	return out
}

// decodeStrict decodes JSON rejecting unknown fields and trailing data.
func decodeStrict(js []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("strict decode into %T: %w", v, err)
	}
	if dec.More() {
		return fmt.Errorf("strict decode into %T: trailing data", v)
	}
	return nil
}

// readmeKustomization is the kustomization a team writes next to its
// existing one, as deploy/kubernetes/README.md tells it to; {{base}} and
// {{component}} are filled in with paths.
const readmeKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {{base}}
components:
  - {{component}}
configMapGenerator:
  - name: sidecache-config
    files:
      - sidecache.yaml
`

// componentOnBase writes the README's kustomization into a temporary
// directory, with the starter config, on top of the example base (the
// app as a team has it before sidecache), and returns that directory.
func componentOnBase(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes only relative paths to other kustomizations.
	rel := func(p string) string {
		a, err := filepath.Abs(p)
		if err == nil {
			a, err = filepath.Rel(dir, a)
		}
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(a)
	}
	k := strings.NewReplacer("{{base}}", rel(exampleBase), "{{component}}", rel(componentDir)).Replace(readmeKustomization)
	cfg, err := os.ReadFile(starterConfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"kustomization.yaml": []byte(k), "sidecache.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// kustomizations lists every kustomization under kubernetes/ that can be
// built on its own (Components cannot), so a new overlay is tested as soon
// as it exists.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir("kubernetes", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(data, []byte("\nkind: Component")) {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("found only %v; want the example base and its overlays", dirs)
	}
	return dirs
}

// TestRender builds every kustomization and the README's recipe, decodes
// them strictly, and checks each sidecar pod against its own config.
func TestRender(t *testing.T) {
	cases := map[string]string{"readme-recipe": componentOnBase(t)}
	for _, dir := range kustomizations(t) {
		cases[filepath.ToSlash(dir)] = dir
	}
	for name, dir := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := render(t, dir)
			injected := 0
			for i := range r.deployments {
				d := &r.deployments[i]
				if d.Annotations[injectAnnotation] != "true" {
					continue
				}
				if sidecar(d) == nil {
					if name == filepath.ToSlash(exampleBase) {
						continue // the app before sidecache
					}
					t.Errorf("deployment %s is annotated %s but has no sidecache sidecar", d.Name, injectAnnotation)
					continue
				}
				injected++
				checkPod(t, r, d)
			}
			if name != filepath.ToSlash(exampleBase) && injected == 0 {
				t.Errorf("no deployment with a sidecache sidecar")
			}
		})
	}
}

// TestOverlays checks what each example overlay is for, beyond the checks
// every sidecar pod gets.
func TestOverlays(t *testing.T) {
	t.Run("dev", func(t *testing.T) {
		r := render(t, "kubernetes/example/overlays/dev")
		if len(r.statefulSets) != 1 || r.statefulSets[0].Name != "redis" {
			t.Fatalf("dev: want one StatefulSet redis, got %d", len(r.statefulSets))
		}
		cfg := sidecarConfig(t, r, &r.deployments[0])
		if cfg.Cache.L2 == nil || len(cfg.Cache.L2.Redis.Addrs) == 0 {
			t.Fatal("dev: sidecar config has no cache.l2.redis.addrs")
		}
		// The dev Redis and the sidecar share the generated password
		// Secret, under its hashed name.
		redisEnv := envByName(r.statefulSets[0].Spec.Template.Spec.Containers[0].Env)["REDIS_PASSWORD"]
		sideEnv := envByName(sidecar(&r.deployments[0]).Env)["REDIS_PASSWORD"]
		if redisEnv == nil || sideEnv == nil || redisEnv.ValueFrom == nil || sideEnv.ValueFrom == nil ||
			redisEnv.ValueFrom.SecretKeyRef.Name != sideEnv.ValueFrom.SecretKeyRef.Name {
			t.Errorf("dev: Redis and sidecar must read REDIS_PASSWORD from the same Secret")
		}
		if len(r.podMonitors) != 0 {
			t.Errorf("dev: has a PodMonitor; dev relies on the scrape annotations (no Prometheus Operator CRDs needed)")
		}
	})
	t.Run("prod", func(t *testing.T) {
		r := render(t, "kubernetes/example/overlays/prod")
		if len(r.statefulSets) != 0 {
			t.Errorf("prod: runs its own Redis; it should point at an existing one")
		}
		d := &r.deployments[0]
		cfg := sidecarConfig(t, r, d)
		if cfg.Cache.L2 == nil || cfg.Cache.L2.Redis.MasterName == "" && !cfg.Cache.L2.Redis.Cluster {
			t.Errorf("prod: want L2 on Sentinel or Cluster")
		}
		pw := envByName(sidecar(d).Env)["REDIS_PASSWORD"]
		if pw == nil || pw.ValueFrom == nil || pw.ValueFrom.SecretKeyRef == nil ||
			pw.ValueFrom.SecretKeyRef.Optional == nil || *pw.ValueFrom.SecretKeyRef.Optional {
			t.Errorf("prod: REDIS_PASSWORD must come from a required Secret")
		}
		if len(r.podMonitors) != 1 || len(r.prometheusRules) != 1 {
			t.Errorf("prod: want the monitoring component (1 PodMonitor, 1 PrometheusRule), got %d, %d",
				len(r.podMonitors), len(r.prometheusRules))
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("prod: want several replicas sharing L2")
		}
		if len(r.pdbs) != 1 {
			t.Errorf("prod: want a PodDisruptionBudget")
		}
	})
}
