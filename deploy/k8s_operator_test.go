package deploy

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestSidecarLeavesGOMEMLIMITToTheBinary (issue 22, item 6): the component
// sets no GOMEMLIMIT, which would override the binary's own 90 % of the
// container's limit with 100 % of it.
func TestSidecarLeavesGOMEMLIMITToTheBinary(t *testing.T) {
	for _, dir := range []string{"kubernetes/example/overlays/dev", "kubernetes/example/overlays/prod"} {
		r := render(t, dir)
		for i := range r.deployments {
			if c := sidecar(&r.deployments[i]); c != nil {
				if env := envByName(c.Env)["GOMEMLIMIT"]; env != nil {
					t.Errorf("%s: the sidecar sets GOMEMLIMIT (%+v); the binary sets 90 %% of the limit itself", dir, env)
				}
			}
		}
	}
}

// TestProdNetworkPolicy: the production example admits clients only to the
// sidecar's proxy port, and the admin port only from Prometheus' namespace.
func TestProdNetworkPolicy(t *testing.T) {
	r := render(t, "kubernetes/example/overlays/prod")
	if len(r.netpols) != 1 {
		t.Fatalf("prod: %d NetworkPolicies, want 1", len(r.netpols))
	}
	np, d := r.netpols[0], r.deployments[0]
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Fatalf("NetworkPolicy selects %v, not the pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
	}
	var open, admin []string
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if len(rule.From) == 0 {
				open = append(open, p.Port.String())
			} else {
				admin = append(admin, p.Port.String())
			}
		}
	}
	if !slices.Equal(open, []string{"http-cache"}) || !slices.Equal(admin, []string{"cache-admin"}) {
		t.Errorf("open to all: %v, restricted: %v; want only http-cache open and cache-admin restricted", open, admin)
	}
	ports := map[string]bool{}
	for _, p := range sidecar(&d).Ports {
		ports[p.Name] = true
	}
	if !ports["http-cache"] || !ports["cache-admin"] {
		t.Errorf("the sidecar names no ports %v", ports)
	}
}

// TestKindExampleImages: the dev overlay, the README's kind/minikube
// example, runs exactly the images `make image image-demo VERSION=dev`
// builds, with a pull policy that uses the images loaded into the cluster.
func TestKindExampleImages(t *testing.T) {
	r := render(t, "kubernetes/example/overlays/dev")
	var images []string
	for _, d := range r.deployments {
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			if strings.HasPrefix(c.Image, "sidecache") {
				images = append(images, c.Image)
				if c.ImagePullPolicy == "Always" {
					t.Errorf("%s: imagePullPolicy Always would not use the image loaded into kind", c.Name)
				}
			}
		}
	}
	slices.Sort(images)
	if !slices.Equal(images, []string{"sidecache-demo:dev", "sidecache:dev"}) {
		t.Errorf("dev overlay images %v, want sidecache:dev and sidecache-demo:dev", images)
	}
}
