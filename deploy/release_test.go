package deploy

import (
	"os"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// releaseTag is what the release process tags and pushes (docs/release.md):
// `git describe` on a release commit, vMAJOR.MINOR.PATCH.
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// TestProdPinsAReleaseImage: the production overlay runs a released image
// from a registry, by a tag the release process produces — not a dev
// build, not latest, not the bare name a node would look up on Docker Hub.
func TestProdPinsAReleaseImage(t *testing.T) {
	data, err := os.ReadFile("kubernetes/example/overlays/prod/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct{ Name, NewName, NewTag string }
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, im := range k.Images {
		if im.Name != "sidecache" {
			continue
		}
		found = true
		if !releaseTag.MatchString(im.NewTag) {
			t.Errorf("prod image tag %q: want a release tag vX.Y.Z", im.NewTag)
		}
		if !regexp.MustCompile(`^[a-z0-9.-]+\.[a-z]+(:[0-9]+)?/`).MatchString(im.NewName) {
			t.Errorf("prod image name %q: want REGISTRY/…, fully qualified", im.NewName)
		}
	}
	if !found {
		t.Error("prod overlay does not pin the sidecache image")
	}
}
