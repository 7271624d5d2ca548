package scheduler

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/imageref"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// pushIndex pushes an index with one random image per architecture to reference.
func pushIndex(t *testing.T, reference string, archs ...string) {
	t.Helper()
	pushAnnotatedIndex(t, reference, nil, archs...)
}

// pushAnnotatedIndex is pushIndex with annotations on the index.
func pushAnnotatedIndex(t *testing.T, reference string, annotations map[string]string, archs ...string) {
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
	if annotations != nil {
		idx = mutate.Annotations(idx, annotations).(v1.ImageIndex)
	}
	ref, err := name.ParseReference(reference, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
}

// loopbackRegistryImages reads the test's registry (on loopback), tags cached for a second.
func loopbackRegistryImages() RegistryImages {
	return RegistryImages{Registry: &imageref.Registry{TagTTL: time.Second,
		Transport: registrynet.Policy{Allow: registrynet.Loopback}.Transport()}, Timeout: 5 * time.Second}
}

func TestRegistryIndexChoosesThePoolAndAMissingImageWaits(t *testing.T) {
	reg := env.Registry
	amd64Only := reg.Host + "/os:amd64-only"
	pushIndex(t, amd64Only, "amd64")
	startScheduler(t, &Reconciler{
		Resolver:   loopbackRegistryImages(),
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

// A Machine's requiredImageAnnotations hold it back from an image that does not say them
// (none, or another value), saying what the image lacks, until the tag is pushed again with
// them; an image that says them is placed at once.
func TestRequiredImageAnnotationsHoldBackAnImageWithout(t *testing.T) {
	reg := env.Registry
	const key = computev1alpha1.ImageAnnotationKubernetesVersion
	plain, older, node := reg.Host+"/os:plain", reg.Host+"/os:older-node", reg.Host+"/os:node"
	pushIndex(t, plain, "amd64")
	pushAnnotatedIndex(t, older, map[string]string{key: "v1.35.0"}, "amd64")
	pushAnnotatedIndex(t, node, map[string]string{key: "v1.36.3"}, "amd64")
	startScheduler(t, &Reconciler{
		Resolver:   loopbackRegistryImages(),
		ImageRetry: time.Second,
	})
	cls := uniq(t, "req")
	mustCreate(t, namespace("req", nil), class(cls, "1", "1Gi"))
	readyPool(t, cls+"-amd", "amd64", "8", "8Gi", []string{cls}, nil)
	requiring := func(image string) func(*computev1alpha1.Machine) {
		return func(m *computev1alpha1.Machine) {
			m.Spec.Image = image
			m.Spec.RequiredImageAnnotations = map[string]string{key: "v1.36.3"}
		}
	}
	for image, says := range map[string]string{plain: "lacks " + key + "=v1.36.3", older: "has " + key + "=v1.35.0, not v1.36.3"} {
		m := machine("req", cls+"-"+strings.TrimPrefix(image, reg.Host+"/os:"), cls, requiring(image))
		mustCreate(t, m)
		got := eventually(t, client.ObjectKeyFromObject(m), "held back: "+says, func(m *computev1alpha1.Machine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonImageRequirementsUnmet &&
				strings.Contains(c.Message, image+" "+says)
		})
		if got.Spec.MachinePoolRef != nil {
			t.Errorf("%s bound to %s with an image that %s", m.Name, got.Spec.MachinePoolRef.Name, says)
		}
	}
	m := machine("req", cls+"-node", cls, requiring(node))
	mustCreate(t, m)
	eventually(t, client.ObjectKeyFromObject(m), "bound with an image that says what it requires", boundTo(cls+"-amd"))
	// The plain tag pushed again with the annotation: its Machine is placed.
	pushAnnotatedIndex(t, plain, map[string]string{key: "v1.36.3"}, "amd64")
	eventually(t, client.ObjectKeyFromObject(&computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "req", Name: cls + "-plain"}}),
		"bound once its image says what it requires", boundTo(cls+"-amd"))
}

// countingResolver counts the images it was asked about: the scheduler's only way to a
// registry.
type countingResolver struct {
	inner ImageResolver
	mu    sync.Mutex
	asked []string
}

func (c *countingResolver) Architectures(ctx context.Context, image string) ([]computev1alpha1.Architecture, error) {
	c.mu.Lock()
	c.asked = append(c.asked, image)
	c.mu.Unlock()
	return c.inner.Architectures(ctx, image)
}

func (c *countingResolver) Annotations(ctx context.Context, image string) (map[string]string, error) {
	c.mu.Lock()
	c.asked = append(c.asked, image)
	c.mu.Unlock()
	return c.inner.Annotations(ctx, image)
}

// The attack: a tenant names another namespace's image on the registry the manager reads
// with its own credential, to learn from the scheduler whether it exists (bound, or
// ImageUnresolved) before any pool refuses it. The scheduler refuses it (ImageNotOwned)
// without reading anything; the tenant's own image and a shared one are read and bound.
func TestSchedulerReadsNoImageOfAnotherNamespace(t *testing.T) {
	reg := env.Registry
	ns := "sched-owner"
	theirs, own, shared := reg.Host+"/victim/os:secret", reg.Host+"/"+ns+"/os:v1", reg.Host+"/anvil/os:v1"
	for _, ref := range []string{theirs, own, shared} {
		pushIndex(t, ref, "amd64")
	}
	resolver := &countingResolver{inner: loopbackRegistryImages()}
	startScheduler(t, &Reconciler{Resolver: resolver, ImageRetry: time.Second,
		ImageFolders: imageowner.FoldersFor(map[string]registrynet.Login{reg.Host: {Username: "anvil-pools", Password: "x"}}, nil)})
	cls := uniq(t, "own")
	mustCreate(t, namespace(ns, nil), class(cls, "1", "1Gi"))
	readyPool(t, cls+"-amd", "amd64", "8", "8Gi", []string{cls}, nil)

	stolen := machine(ns, cls+"-theirs", cls, func(m *computev1alpha1.Machine) { m.Spec.Image = theirs })
	mustCreate(t, stolen)
	got := eventually(t, client.ObjectKeyFromObject(stolen), "refused as another namespace's image", func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
		return c != nil && c.Reason == computev1alpha1.ReasonImageNotOwned
	})
	if got.Spec.MachinePoolRef != nil {
		t.Errorf("bound to %s with another namespace's image", got.Spec.MachinePoolRef.Name)
	}
	if msg := meta.FindStatusCondition(got.Status.Conditions, computev1alpha1.ConditionScheduled).Message; !strings.Contains(msg, reg.Host+"/"+ns+"/") {
		t.Errorf("the refusal does not say where the namespace's images go: %q", msg)
	}
	for _, image := range []string{own, shared} {
		m := machine(ns, cls+"-"+strings.Split(strings.Split(image, "/")[1], "/")[0], cls, func(m *computev1alpha1.Machine) { m.Spec.Image = image })
		mustCreate(t, m)
		eventually(t, client.ObjectKeyFromObject(m), "bound with "+image, boundTo(cls+"-amd"))
	}
	resolver.mu.Lock()
	defer resolver.mu.Unlock()
	if slices.Contains(resolver.asked, theirs) {
		t.Errorf("the scheduler read %s for namespace %s: asked about %v", theirs, ns, resolver.asked)
	}
}
