package metal

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/metal/site"
)

// installTenantRBAC gives user the shipped tenant roles in ns.
func installTenantRBAC(t *testing.T, user, ns string) {
	t.Helper()
	if err := rig.Env.InstallTenant(context.Background(), user, ns); err != nil {
		t.Fatal(err)
	}
}

// as is a client acting as user, through the apiserver's impersonation.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	c, err := rig.Env.As(user)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With the shipped tenant role, a tenant works in its own namespace and reads its server's
// hardware there, and reaches nothing of the infrastructure side or of other tenants.
func TestTenantRBAC(t *testing.T) {
	ctx := context.Background()
	infra := rig.NewNamespace(t, "infra")
	tenantA, tenantB := rig.NewNamespace(t, "tenant-a"), rig.NewNamespace(t, "tenant-b")
	installTenantRBAC(t, "alice", tenantA)
	alice := as(t, "alice")

	bmc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "bmc-1"},
		Data: map[string][]byte{"username": []byte("root"), "password": []byte("calvin")}}
	ironicCreds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: site.CredentialsSecret},
		Data: map[string][]byte{"username": []byte("anvil"), "password": []byte("x")}}
	host := fakeHost(infra, "server-1", 1)
	hw := &metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: "web",
		Labels: map[string]string{metalv1alpha1.LabelMachine: "web"}}, Spec: metalv1alpha1.HardwareDataSpec{MemoryMiB: 4096}}
	other := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tenantB, Name: "theirs"},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: "example.com/os:1"}}
	rig.Create(t, bmc, ironicCreds, host, hw, other)

	mine := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: "web"},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: "example.com/os:1"}}
	if err := alice.Create(ctx, mine); err != nil {
		t.Fatalf("creating a Machine in her own namespace: %v", err)
	}
	if err := alice.Get(ctx, client.ObjectKeyFromObject(hw), &metalv1alpha1.HardwareData{}); err != nil {
		t.Fatalf("reading her server's HardwareData: %v", err)
	}
	if err := alice.List(ctx, &computev1alpha1.MachineClassList{}); err != nil {
		t.Fatalf("listing MachineClasses: %v", err)
	}

	forbidden := []struct {
		what string
		call func() error
	}{
		{"get a Host", func() error { return alice.Get(ctx, client.ObjectKeyFromObject(host), &metalv1alpha1.Host{}) }},
		{"list Hosts", func() error { return alice.List(ctx, &metalv1alpha1.HostList{}, client.InNamespace(infra)) }},
		{"list Hosts cluster-wide", func() error { return alice.List(ctx, &metalv1alpha1.HostList{}) }},
		{"get the BMC Secret", func() error { return alice.Get(ctx, client.ObjectKeyFromObject(bmc), &corev1.Secret{}) }},
		{"get Ironic's credentials", func() error { return alice.Get(ctx, client.ObjectKeyFromObject(ironicCreds), &corev1.Secret{}) }},
		{"list HostPolicies", func() error { return alice.List(ctx, &metalv1alpha1.HostPolicyList{}, client.InNamespace(infra)) }},
		{"list the infrastructure HardwareData", func() error {
			return alice.List(ctx, &metalv1alpha1.HardwareDataList{}, client.InNamespace(infra))
		}},
		{"get another tenant's Machine", func() error { return alice.Get(ctx, client.ObjectKeyFromObject(other), &computev1alpha1.Machine{}) }},
		{"list another tenant's Machines", func() error {
			return alice.List(ctx, &computev1alpha1.MachineList{}, client.InNamespace(tenantB))
		}},
		{"write her Machine's status", func() error {
			m := &computev1alpha1.Machine{}
			if err := alice.Get(ctx, client.ObjectKeyFromObject(mine), m); err != nil {
				return err
			}
			m.Status.State = computev1alpha1.MachineStateRunning
			return alice.Status().Update(ctx, m)
		}},
		{"write her HardwareData", func() error {
			h := &metalv1alpha1.HardwareData{}
			if err := alice.Get(ctx, client.ObjectKeyFromObject(hw), h); err != nil {
				return err
			}
			h.Spec.MemoryMiB = 1 << 30
			return alice.Update(ctx, h)
		}},
	}
	for _, f := range forbidden {
		if err := f.call(); !apierrors.IsForbidden(err) {
			t.Errorf("alice could %s: %v, want Forbidden", f.what, err)
		}
	}
}
