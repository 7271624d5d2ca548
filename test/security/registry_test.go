package security

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/registrynet/registrynettest"
)

// The attack: a tenant names an image on a registry inside the site — a loopback port of
// the manager's host (etcd, an admin API), the cloud metadata service, a private address —
// for the manager's scheduler, which reads the image's index to learn its architectures,
// to connect there from the control plane (SSRF). Before the fix the manager connected to
// every one of them (the listener counted its connections).
func TestTenantImageOnAnInternalRegistryIsNeverRead(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "tenant")
	attacker := tenant(t, "mallory", ns)
	class := "ssrf-" + ns
	create(t, env.Client, &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}})
	// A "service" inside the site (etcd on 127.0.0.1:2379) that counts connections.
	service := registrynettest.StartSilent(t)
	inside := service.Host
	_, port, _ := net.SplitHostPort(inside)
	startManager(t)

	images := map[string]string{
		"loopback":       inside + "/etcd/keys:latest",
		"localhost":      "localhost:" + port + "/etcd/keys:latest",
		"metadata":       "169.254.169.254/latest/meta-data:x",
		"private":        "10.0.0.1:5000/internal/os:1",
		"ipv6-loopback":  "[::1]:" + port + "/etcd/keys:latest",
		"unique-local-6": "[fd00::1]:5000/internal/os:1",
	}
	for name, image := range images {
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: class}, Image: image}}
		if err := attacker.Create(ctx, m); err != nil {
			t.Fatalf("the tenant cannot create Machine %s: %v", name, err)
		}
	}
	for name, image := range images {
		m := &computev1alpha1.Machine{}
		var cond *metav1.Condition
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := attacker.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
				return false, err
			}
			cond = meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
			return cond != nil, nil
		})
		if err != nil {
			t.Fatalf("Machine %s (%s) got no Scheduled condition: %v", name, image, err)
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != computev1alpha1.ReasonRegistryRefused {
			t.Errorf("Machine %s (%s): Scheduled=%s %s %q, want False %s", name, image, cond.Status, cond.Reason, cond.Message, computev1alpha1.ReasonRegistryRefused)
			continue
		}
		// The tenant reads what it wrote and that it is refused; nothing of the site: not
		// a resolved address, the kind of network, a dial error or the manager's flags.
		if !strings.Contains(cond.Message, image) || !strings.Contains(cond.Message, "refused") {
			t.Errorf("Machine %s: the message %q does not name the image and the refusal", name, cond.Message)
		}
		for _, leak := range []string{"loopback", "link-local", "private", "resolves", "dial", "connect", "--allow-registry"} {
			if strings.Contains(cond.Message, leak) {
				t.Errorf("Machine %s: the message %q tells the tenant %q", name, cond.Message, leak)
			}
		}
		t.Logf("%s: %s=%s %s: %s", image, cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	if n := service.Accepted.Load(); n != 0 {
		t.Errorf("the manager made %d connections to the loopback port %s a tenant's image named", n, inside)
	}
}
