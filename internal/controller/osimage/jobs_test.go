package osimage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

// Builders of an OSImage without a push Secret get the registry's push credential, at the
// address they reach the registry at (anvil dev's registry takes writes only with it).
func TestBuildersGetTheRegistrysPushCredential(t *testing.T) {
	r := &OSImageReconciler{Config: Config{Registry: "127.0.0.1:5001", GuestRegistry: "10.0.2.100:5000",
		BuilderPush: &authn.Basic{Username: "anvil-push", Password: "s3cret"}}}
	raw, err := r.dockerConfig(context.Background(), &imagesv1alpha1.OSImage{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	want := base64.StdEncoding.EncodeToString([]byte("anvil-push:s3cret"))
	if len(cfg.Auths) != 1 || cfg.Auths["10.0.2.100:5000"].Auth != want {
		t.Fatalf("docker config %s, want only the push credential for 10.0.2.100:5000", raw)
	}
	// Without a push credential (a registry that takes anonymous writes), none.
	r.Config.BuilderPush = nil
	if raw, err := r.dockerConfig(context.Background(), &imagesv1alpha1.OSImage{}); err != nil || raw != nil {
		t.Fatalf("without a push credential: %s, %v; want none", raw, err)
	}
}
