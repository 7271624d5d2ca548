package osimage_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	"github.com/anvil-dev/anvil/internal/imagebuild"
	"github.com/anvil-dev/anvil/internal/registry"
)

// Attack: a tenant builds an OS image, reads the registry credential its builders get from
// the build's job Secret (in its own namespace), and pushes with it over another tenant's
// image and over the builders' image. The credential the controller put there writes to the
// build's own output repository and nowhere else (before scoped credentials it was the
// registry's own push credential, which wrote everywhere).
func TestBuildersGetAPushCredentialForTheirOutputOnly(t *testing.T) {
	key := []byte("registry-scope-key-for-this-test")
	both, _ := setup(t, func(c *osimagecontroller.Config) {
		c.BuilderPush = func(repository string, reads []string, expires time.Time) authn.Basic {
			p := registry.ScopedPush(key, repository, reads, expires)
			return authn.Basic{Username: p.Username, Password: p.Password}
		}
	})
	ctx := context.Background()
	o := recipe("scoped", both, "amd64")
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	b := waitBuild(t, o, 1)

	// What the tenant reads: the job Secret, the amd64 job, its docker config.
	s := &corev1.Secret{}
	eventually(t, "the build's job Secret", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: imagebuild.JobSecretName(b.Name)}, s)
		return err == nil, "not yet"
	})
	var job buildagent.Job
	if err := json.Unmarshal(s.Data["amd64"], &job); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	if err := json.Unmarshal(job.DockerConfig, &cfg); err != nil {
		t.Fatalf("job's docker config %s: %v", job.DockerConfig, err)
	}
	if len(cfg.Auths) != 1 {
		t.Fatalf("job's docker config %s, want one credential, for the builders' registry 10.0.2.100:5000", job.DockerConfig)
	}
	raw, err := base64.StdEncoding.DecodeString(cfg.Auths["10.0.2.100:5000"].Auth)
	if err != nil {
		t.Fatal(err)
	}
	user, pass, _ := strings.Cut(string(raw), ":")
	found := &authn.Basic{Username: user, Password: pass}

	// The registry the builders push to, holding the key (anvil dev's, with the push
	// credential only anvil holds).
	reg, err := registry.Start(ctx, 0, "", &registry.Auth{Push: registry.Credential{Username: "anvil-push", Password: "only-anvil-knows"}, ScopeKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	own := strings.TrimPrefix(o.Spec.Output.Repository, env.Registry.Host+"/")
	for _, repo := range []string{"anvil/builder", "team-b/os", own + "-other"} {
		ref, err := name.ParseReference(reg.Host+"/"+repo+":latest", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		err = remote.Write(ref, img, remote.WithAuth(found))
		var te *transport.Error
		if !errors.As(err, &te) || te.StatusCode != http.StatusForbidden {
			t.Errorf("push to %s with the job's credential: %v, want HTTP 403", repo, err)
		}
	}
	ref, err := name.ParseReference(reg.Host+"/"+own+":"+job.Tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(found)); err != nil {
		t.Errorf("push to the build's own output %s: %v", own, err)
	}
	// Reads: its base and its output, and no other tenant's image.
	for repo, status := range map[string]int{"anvil/testos": http.StatusOK, own: http.StatusOK, "team-b/os": http.StatusForbidden} {
		ref, err := name.ParseReference(reg.Host+"/"+repo+":latest", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if repo == "anvil/testos" || repo == "team-b/os" {
			if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "anvil-push", Password: "only-anvil-knows"})); err != nil {
				t.Fatal(err)
			}
		} else if ref, err = name.ParseReference(reg.Host+"/"+repo+":"+job.Tag, name.Insecure); err != nil {
			t.Fatal(err)
		}
		_, err = remote.Head(ref, remote.WithAuth(found))
		var te *transport.Error
		if (status == http.StatusOK) != (err == nil) || (err != nil && (!errors.As(err, &te) || te.StatusCode != status)) {
			t.Errorf("read %s with the job's credential: %v, want HTTP %d", repo, err, status)
		}
	}
}

// Attack: a tenant names another tenant's repository, or the builders' image, as its
// OSImage's output, so that its builders get a credential for it and the manager publishes
// its index there. The OSImage is refused (OutputNotInNamespace) before any build, job
// Secret or builder exists.
func TestTenantCannotPublishOutsideItsNamespace(t *testing.T) {
	both, _ := setup(t)
	ctx := context.Background()
	for i, repo := range []string{"team-b/os", "anvil/builder", "defaultx/os"} {
		o := recipe(fmt.Sprintf("elsewhere-%d", i), both, "amd64")
		o.Spec.Output.Repository = env.Registry.Host + "/" + repo
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		if msg := waitReady(t, o, imagesv1alpha1.ReasonOutputNotOwned); !strings.Contains(msg, "not under "+env.Registry.Host+"/default/") {
			t.Errorf("output %s: Ready says %q, want it to name where the namespace may publish", repo, msg)
		}
		builds := &imagesv1alpha1.OSImageBuildList{}
		if err := env.Client.List(ctx, builds, client.MatchingLabels{imagesv1alpha1.LabelOSImage: o.Name}); err != nil {
			t.Fatal(err)
		}
		if len(builds.Items) != 0 || len(machinesOf(t, o.Name)) != 0 {
			t.Errorf("output %s: %d builds and %d Machines, want none", repo, len(builds.Items), len(machinesOf(t, o.Name)))
		}
	}
}
