package poollet_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/registrynet/registrynettest"
)

// The attack: with the scheduler not reading images (--image-architectures any), a
// tenant's Machine whose image tag names a registry inside the site — a loopback port of
// the pool's host, the metadata service — reaches the poollet, which reads the tag to pin
// its digest: it connected there from the pool's host. Now the poollet holds to the
// address rules: nothing is connected to, and the Machine says its registry is refused.
func TestPoolletNeverReadsAnInternalRegistry(t *testing.T) {
	startControllers(t)
	// A "service" inside the site (etcd on 127.0.0.1:2379) that counts connections.
	service := registrynettest.StartSilent(t)
	p := newPool(t, "internal-registry", nil)
	for name, image := range map[string]string{
		"loopback": service.Host + "/etcd/keys:latest",
		"metadata": "169.254.169.254/latest/meta-data:x",
	} {
		m := newMachine(t, p.name, name, func(m *computev1alpha1.Machine) { m.Spec.Image = image })
		got := waitFor(t, m, "refused its registry", func(m *computev1alpha1.Machine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionImageReady)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonRegistryRefused
		})
		msg := meta.FindStatusCondition(got.Status.Conditions, computev1alpha1.ConditionImageReady).Message
		if !strings.Contains(msg, image) || strings.Contains(msg, "loopback") || strings.Contains(msg, "--allow-registry") {
			t.Errorf("Machine %s: message %q, want the image named and nothing of the site", name, msg)
		}
		if rms := p.runtimeMachines(got); len(rms) != 0 {
			t.Errorf("Machine %s: %d runtime machines for an image whose registry was refused", name, len(rms))
		}
	}
	if n := service.Accepted.Load(); n != 0 {
		t.Errorf("the poollet made %d connections to the loopback port a tenant's image named", n)
	}
}
