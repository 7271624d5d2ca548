package poollet_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/imageowner"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// The attack: a tenant's Machine names another namespace's image on anvil's registry,
// which its pool reads with the pools' read credential, so the tenant boots (and reads
// from inside) another tenant's OS image; or it edits a running Machine's spec.image to
// one. The poollet refuses both before reading the image or asking the runtime
// (ImageReady=False, ImageNotOwned); its own namespace's image and a shared one boot.
func TestTenantCannotBootAnotherNamespacesImage(t *testing.T) {
	startControllers(t)
	const reg = "127.0.0.1:5001"
	digest := "@sha256:" + strings.Repeat("2", 64)
	p := &testPool{t: t, name: "image-owner"}
	p.imageFolders = imageowner.FoldersFor(map[string]registrynet.Login{reg: {Username: "anvil-pools", Password: "x"}}, []string{"infra/os"})
	startPool(t, p, func(c *fake.Config) {})
	ns := "ns-" + p.name
	notOwned := func(m *computev1alpha1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionImageReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonImageNotOwned
	}
	running := func(m *computev1alpha1.Machine) bool { return m.Status.MachineID != "" }

	for name, image := range map[string]string{
		"theirs":        reg + "/default/built-os" + digest,
		"theirs-tagged": reg + "/default/built-os:latest",
		"prefix":        reg + "/" + ns + "x/os" + digest,
	} {
		m := newMachine(t, p.name, name, func(m *computev1alpha1.Machine) { m.Spec.Image = image })
		got := waitFor(t, m, "refused another namespace's image", notOwned)
		msg := meta.FindStatusCondition(got.Status.Conditions, computev1alpha1.ConditionImageReady).Message
		if !strings.Contains(msg, "push the image under "+reg+"/"+ns+"/") {
			t.Errorf("Machine %s: ImageReady says %q, want what to do", name, msg)
		}
		if rms := p.runtimeMachines(got); len(rms) != 0 {
			t.Errorf("Machine %s: %d runtime machines for another namespace's image", name, len(rms))
		}
	}
	for name, image := range map[string]string{
		"own":       reg + "/" + ns + "/os" + digest,
		"anvil":     reg + "/anvil/testos" + digest,
		"shared":    reg + "/infra/os/base" + digest,
		"elsewhere": testImage, // another registry: not this rule's
	} {
		m := newMachine(t, p.name, name, func(m *computev1alpha1.Machine) { m.Spec.Image = image })
		waitFor(t, m, "ran its image", running)
	}

	// A running Machine's spec.image edited to another namespace's: no reimage.
	own := &computev1alpha1.Machine{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "own"}, own); err != nil {
		t.Fatal(err)
	}
	own.Spec.Image = reg + "/default/built-os" + digest
	if err := env.Client.Update(context.Background(), own); err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, own, "refused the edited image", notOwned)
	if rms := p.runtimeMachines(got); len(rms) != 1 || !strings.Contains(rms[0].GetSpec().GetImage().GetReference(), "/"+ns+"/os") {
		t.Errorf("after the edit the runtime holds %v, want the machine on its own image", rms)
	}
}
