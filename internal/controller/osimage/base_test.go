package osimage_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/test/testos"
)

// countingRegistry is the test registry behind a proxy that counts the requests naming
// each repository: the builders' registry as the controllers see it.
type countingRegistry struct {
	Host string
	mu   sync.Mutex
	seen map[string]int
}

func newCountingRegistry(t *testing.T) *countingRegistry {
	t.Helper()
	c := &countingRegistry{seen: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: env.Registry.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.seen[r.URL.Path]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.Host = strings.TrimPrefix(srv.URL, "http://")
	return c
}

// requests is how many requests named repository.
func (c *countingRegistry) requests(repository string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for path, count := range c.seen {
		if strings.HasPrefix(path, "/v2/"+repository+"/") {
			n += count
		}
	}
	return n
}

func tenantNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// Attack: a tenant (namespace mallory) names another tenant's image on the builders'
// registry as its OSImage's base, for its steps to run inside it and its builders'
// credential to read it (before the fix it built and published mallory/steal). The OSImage
// is refused with BaseNotOwned, and no request for that image reaches the registry; a base
// in a folder the admin shares, and a base of the namespace's own, still build.
func TestTenantCannotBuildOnAnotherNamespacesBase(t *testing.T) {
	reg := newCountingRegistry(t)
	setup(t, func(c *osimagecontroller.Config) {
		c.Registry = reg.Host
		c.BuilderImage = strings.Replace(c.BuilderImage, env.Registry.Host, reg.Host, 1)
		c.SharedFolders = []string{"infra/os"}
	})
	ctx := context.Background()
	dir := testos.Dir(t)
	for _, repo := range []string{"default/built-os", "infra/os/base", "mallory/own-base"} {
		if _, _, err := osimage.PushDirs(ctx, env.Registry.Host+"/"+repo+":latest",
			map[computev1alpha1.Architecture]string{"amd64": filepath.Join(dir, "amd64")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	tenantNamespace(t, "mallory")
	osImage := func(name, base string) *imagesv1alpha1.OSImage {
		o := recipe(name, reg.Host+"/"+base+":latest", "amd64")
		o.Namespace = "mallory"
		o.Spec.Output.Repository = reg.Host + "/mallory/" + name
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o
	}

	steal := osImage("steal", "default/built-os")
	msg := waitReady(t, steal, imagesv1alpha1.ReasonBaseNotOwned)
	if !strings.Contains(msg, "push the image under "+reg.Host+"/mallory/") || strings.Contains(msg, "namespace default") {
		t.Errorf("Ready says %q: want what to do, and nothing about whose the image is", msg)
	}
	for _, o := range []*imagesv1alpha1.OSImage{osImage("shared", "infra/os/base"), osImage("own", "mallory/own-base")} {
		if b := waitBuild(t, o, 1); b.Namespace != "mallory" {
			t.Errorf("build %s in %s", b.Name, b.Namespace)
		}
	}
	time.Sleep(time.Second) // reconciles of steal since: still no read
	if n := reg.requests("default/built-os"); n != 0 {
		t.Errorf("%d requests for default/built-os reached the registry, want none", n)
	}
	if reg.requests("infra/os/base") == 0 || reg.requests("mallory/own-base") == 0 {
		t.Errorf("the allowed bases were never read: the proxy counts nothing (%v)", reg.seen)
	}
	builds := &imagesv1alpha1.OSImageBuildList{}
	if err := env.Client.List(ctx, builds, client.InNamespace("mallory"), client.MatchingLabels{imagesv1alpha1.LabelOSImage: "steal"}); err != nil {
		t.Fatal(err)
	}
	if len(builds.Items) != 0 {
		t.Errorf("%d builds of steal, want none", len(builds.Items))
	}
}
