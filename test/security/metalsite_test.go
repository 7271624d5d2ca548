package security

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
)

// host is a fake-hardware Host in ns.
func host(ns, name string) *metalv1alpha1.Host {
	return &metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metalv1alpha1.HostSpec{BMC: metalv1alpha1.BMC{Address: "fake://" + name}, BootMACAddress: "52:54:00:5e:ff:01",
			Architecture: computev1alpha1.ArchitectureAMD64}}
}

// The attack: the credentials of one metal site (its ServiceAccount's token, bound by
// rbac.InstallMetal to the shipped anvil-metal roles; a site host, compromised) take over
// another site's servers — claim its Hosts for a Machine of the attacker's choosing, change
// their BMC or status, delete or plant Hosts there — widen its own HostPolicy, or rewrite
// tenants' Machines. Before the fix the shipped ClusterRole let a site write every Host of
// every namespace. The requests the site makes are allowed.
func TestMetalSiteCannotWriteMachinesOrOtherSitesHosts(t *testing.T) {
	ctx := context.Background()
	site, other, tenantNS := newNamespace(t, "site"), newNamespace(t, "other-site"), newNamespace(t, "tenant")
	if _, err := rbac.InstallMetal(ctx, env.Client, site); err != nil {
		t.Fatal(err)
	}
	own, victim := host(site, "own"), host(other, "victim")
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "web"},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
			Image: "registry.example/os@sha256:" + fmt.Sprintf("%064d", 0)}}
	policy := &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: site, Name: "tenant"},
		Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{tenantNS}}}
	create(t, env.Client, own, victim, m, policy)
	c := serviceAccountToken(t, site, rbac.MetalServiceAccount)

	// write changes obj as mutate says, as the site, through its status when status.
	write := func(obj client.Object, status bool, mutate func()) func(context.Context) error {
		return func(ctx context.Context) error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			base := obj.DeepCopyObject().(client.Object)
			mutate()
			if status {
				return c.Status().Patch(ctx, obj, client.MergeFrom(base))
			}
			return c.Patch(ctx, obj, client.MergeFrom(base))
		}
	}
	patch := func(obj client.Object, mutate func()) func(context.Context) error { return write(obj, false, mutate) }
	patchStatus := func(obj client.Object, mutate func()) func(context.Context) error { return write(obj, true, mutate) }
	claim := &metalv1alpha1.ConsumerReference{Namespace: tenantNS, Name: "web", UID: string(m.UID)}
	tryAll(t, "metal site "+site, []attempt{
		// Another site's servers.
		{"claim another site's Host for a Machine", false, patch(victim, func() { victim.Spec.ConsumerRef = claim })},
		{"point another site's Host at another BMC", false, patch(victim, func() { victim.Spec.BMC.Address = "redfish://203.0.113.9/x" })},
		{"mark another site's Host available", false, patchStatus(victim, func() { victim.Status.ProvisioningState = metalv1alpha1.StateAvailable })},
		{"read another site's Host", false, func(ctx context.Context) error {
			return c.Get(ctx, client.ObjectKeyFromObject(victim), &metalv1alpha1.Host{})
		}},
		{"list Hosts of every namespace", false, func(ctx context.Context) error { return c.List(ctx, &metalv1alpha1.HostList{}) }},
		{"delete another site's Host", false, func(ctx context.Context) error { return c.Delete(ctx, host(other, "victim")) }},
		{"plant a Host in another site", false, func(ctx context.Context) error { return c.Create(ctx, host(other, "planted")) }},
		{"plant a Host in a tenant namespace", false, func(ctx context.Context) error { return c.Create(ctx, host(tenantNS, "planted")) }},
		{"read another site's HostPolicies", false, func(ctx context.Context) error {
			return c.List(ctx, &metalv1alpha1.HostPolicyList{}, client.InNamespace(other))
		}},
		// Its own site's policy: the admins'.
		{"widen its own HostPolicy to every namespace", false, patch(policy, func() { policy.Spec.NamespaceSelector = &metav1.LabelSelector{} })},
		{"create a HostPolicy in its own site", false, func(ctx context.Context) error {
			return c.Create(ctx, &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: site, Name: "everyone"},
				Spec: metalv1alpha1.HostPolicySpec{NamespaceSelector: &metav1.LabelSelector{}}})
		}},
		// Tenants' Machines.
		{"rewrite a Machine's image", false, patch(m, func() { m.Spec.Image = "evil.example/os:1" })},
		{"bind a Machine to a pool", false, patch(m, func() { m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: "anywhere"} })},
		{"write a Machine's status", false, patchStatus(m, func() { m.Status.State = computev1alpha1.MachineStateRunning })},
		{"delete a Machine", false, func(ctx context.Context) error { return c.Delete(ctx, m.DeepCopy()) }},
		{"create a Machine", false, func(ctx context.Context) error {
			return c.Create(ctx, &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "planted"}, Spec: m.Spec})
		}},
		{"list Machines of every namespace", false, func(ctx context.Context) error { return c.List(ctx, &computev1alpha1.MachineList{}) }},
		// What the site does.
		{"read a tenant's Machine", true, func(ctx context.Context) error {
			return c.Get(ctx, client.ObjectKeyFromObject(m), &computev1alpha1.Machine{})
		}},
		{"list its Hosts", true, func(ctx context.Context) error {
			return c.List(ctx, &metalv1alpha1.HostList{}, client.InNamespace(site))
		}},
		{"claim its Host", true, patch(own, func() { own.Spec.ConsumerRef = claim })},
		{"write its Host's status", true, patchStatus(own, func() { own.Status.ProvisioningState = metalv1alpha1.StateAvailable })},
		{"read its HostPolicies", true, func(ctx context.Context) error {
			return c.List(ctx, &metalv1alpha1.HostPolicyList{}, client.InNamespace(site))
		}},
		{"write a tenant's view of its server", true, func(ctx context.Context) error {
			return c.Create(ctx, &metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "web"}})
		}},
		{"create a config-drive Secret in its namespace", true, func(ctx context.Context) error {
			return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: site, GenerateName: "config-drive-"}})
		}},
	}, nil)
}

// A metal site runs under its own identity with the shipped roles and nothing more: the
// Host controller enrols and inspects its Hosts, the metal runtime claims one for a
// tenant's Machine and provisions it, and the poollet (its own identity) reports it
// Running. A right the shipped roles lack would stop this with Forbidden.
func TestMetalSiteRunsAMachineWithItsOwnIdentity(t *testing.T) {
	s := startMetalSite(t, map[string]map[string]string{"server-1": nil})
	if want := rbac.MetalUser(s.infra); s.pool.SiteUser != want {
		t.Fatalf("the site runs as %q, want its ServiceAccount %q", s.pool.SiteUser, want)
	}
	if want := rbac.PoolletUser("pool-" + s.tenant); s.pool.PoolletUser != want {
		t.Fatalf("the poollet runs as %q, want its ServiceAccount %q", s.pool.PoolletUser, want)
	}
	if err := s.as.Create(context.Background(), s.machine("web")); err != nil {
		t.Fatal(err)
	}
	s.awaitMachine(t, "web", "Running", 3*time.Minute, running)
	if h := s.hostOf(t, s.tenant, "web"); h == nil || h.Status.ProvisioningState != metalv1alpha1.StateProvisioned {
		t.Fatalf("the Machine runs, but no Host is provisioned for it: %+v", h)
	}
}
