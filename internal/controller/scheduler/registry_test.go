package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// pushIndex pushes an index with one random image per architecture to reference.
func pushIndex(t *testing.T, reference string, archs ...string) {
	t.Helper()
	var idx v1.ImageIndex = empty.Index
	for _, a := range archs {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: a}}})
	}
	ref, err := name.ParseReference(reference, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryIndexChoosesThePoolAndAMissingImageWaits(t *testing.T) {
	reg := env.Registry
	amd64Only := reg.Host + "/os:amd64-only"
	pushIndex(t, amd64Only, "amd64")
	startScheduler(t, &Reconciler{
		Resolver: RegistryImages{Registry: &imageref.Registry{TagTTL: time.Second,
			Transport: registrynet.Policy{Allow: registrynet.Loopback}.Transport()}, Timeout: 5 * time.Second},
		ImageRetry: time.Second,
	})
	cls := uniq(t, "reg")
	mustCreate(t, namespace("reg", nil), class(cls, "1", "1Gi"))
	// The arm64 pool sorts first and is emptier: only the index keeps the Machine off it.
	readyPool(t, cls+"-a-arm", "arm64", "64", "64Gi", []string{cls}, nil)
	readyPool(t, cls+"-b-amd", "amd64", "8", "8Gi", []string{cls}, nil)
	m := machine("reg", cls+"-m", cls, func(m *computev1alpha1.Machine) { m.Spec.Image = amd64Only })
	mustCreate(t, m)
	eventually(t, client.ObjectKeyFromObject(m), "bound to the amd64 pool", boundTo(cls+"-b-amd"))

	later := reg.Host + "/os:pushed-later"
	waiting := machine("reg", cls+"-later", cls, func(m *computev1alpha1.Machine) { m.Spec.Image = later })
	mustCreate(t, waiting)
	eventually(t, client.ObjectKeyFromObject(waiting), "told its image is missing", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return scheduledFalse("reading image "+later)(m) && c.Reason == computev1alpha1.ReasonImageUnresolved
	})
	got := eventually(t, client.ObjectKeyFromObject(waiting), "still unbound", scheduledFalse(later))
	if got.Spec.MachinePoolRef != nil {
		t.Fatalf("bound to %s without an image", got.Spec.MachinePoolRef.Name)
	}
	pushIndex(t, later, "arm64")
	eventually(t, client.ObjectKeyFromObject(waiting), "bound to the arm64 pool once the image exists", boundTo(cls+"-a-arm"))
}
