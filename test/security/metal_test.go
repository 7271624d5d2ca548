package security

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	anvilmanager "github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/metalpool"
)

// metalSite is a bare-metal pool as an infrastructure team runs it: Hosts of fake
// hardware in their own namespace under a real Ironic, the metal runtime behind a real MRI
// socket, its poollet and anvil's manager (the scheduler), and one tenant namespace a
// HostPolicy lets use every Host. The tenant acts with the shipped tenant role.
type metalSite struct {
	infra, tenant string
	class, image  string
	// as is a client acting as the tenant.
	as client.Client
	// pool is the running pool: its site and poollet, each as its own ServiceAccount.
	pool *metalpool.Running
}

// startMetalSite starts a site whose Hosts are named and labelled by hosts.
func startMetalSite(t *testing.T, hosts map[string]map[string]string) *metalSite {
	t.Helper()
	s := &metalSite{infra: newNamespace(t, "infra"), tenant: newNamespace(t, "tenant")}
	s.class = "metal-" + s.tenant
	create(t, env.Client,
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: s.class},
			Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}},
		&metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.infra, Name: "tenant"},
			Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{s.tenant}}})
	i := 0
	for name, labels := range hosts {
		i++
		create(t, env.Client, &metalv1alpha1.Host{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.infra, Name: name, Labels: labels},
			Spec: metalv1alpha1.HostSpec{
				BMC:            metalv1alpha1.BMC{Address: "fake://" + name + "?cpus=8&memory_mb=16384&local_gb=100"},
				BootMACAddress: fmt.Sprintf("52:54:00:5e:%02x:%02x", len(s.infra)%256, i),
				Architecture:   computev1alpha1.ArchitectureAMD64,
			},
		})
	}
	startManager(t)
	dir, err := os.MkdirTemp("", "anvil-pool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := metalpool.Start(ctx, env.Config, env.Client, pool.Config{
		// Fake hardware has no disks to wipe (the Host controller never wipes it).
		Site: site.Config{RestConfig: env.Config, Namespace: s.infra, StateDir: dir, BusyPoll: 500 * time.Millisecond,
			Wipe: site.Wipe{Method: site.WipeNone}},
		Name: "pool-" + s.tenant, ImageCacheDir: filepath.Join(dir, "cache"),
		// The tests' registry is on loopback: the one non-public registry the pool reads.
		ImageCache: osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}},
	}, 2*time.Second)
	if err != nil {
		t.Fatalf("starting the metal pool: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the pool: %v", err)
		}
	})
	for name := range hosts {
		s.waitHost(t, name, "Available", 2*time.Minute, func(h *metalv1alpha1.Host) bool {
			return h.Status.ProvisioningState == metalv1alpha1.StateAvailable && h.Status.OperationalStatus == metalv1alpha1.OperationalOK
		})
	}
	s.image = pushDisk(t, s.tenant)
	s.as = tenant(t, "tenant-of-"+s.tenant, s.tenant)
	s.pool = p
	return s
}

// startManager runs anvil's manager (the scheduler and the rest) until the test ends, as
// an operator would with the tests' registry allow-listed.
func startManager(t *testing.T) {
	t.Helper()
	o := anvilmanager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	// The tests' registry, on loopback: the one non-public registry the scheduler may read.
	o.AllowRegistry = []string{env.Registry.Host}
	mgr, err := anvilmanager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, mgr)
}

// pushDisk publishes a raw amd64 disk and returns its reference.
func pushDisk(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	disk := make([]byte, 1<<20)
	copy(disk, "a bare-metal disk\n")
	if err := os.WriteFile(filepath.Join(dir, osimage.DiskRawFile), disk, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := env.Registry.Host + "/security/" + name + ":1"
	if _, _, err := osimage.PushDirs(context.Background(), ref, map[computev1alpha1.Architecture]string{"amd64": dir}, nil); err != nil {
		t.Fatal(err)
	}
	return ref
}

// machine is a Machine of the site's class and image in the tenant's namespace.
func (s *metalSite) machine(name string) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: s.tenant, Name: name},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: s.class}, Image: s.image}}
}

func (s *metalSite) waitHost(t *testing.T, name, what string, timeout time.Duration, cond func(*metalv1alpha1.Host) bool) {
	t.Helper()
	h := &metalv1alpha1.Host{}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: s.infra, Name: name}, h); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cond(h), nil
	})
	if err != nil {
		t.Fatalf("Host %s never became %s: %s %s %q", name, what, h.Status.ProvisioningState, h.Status.OperationalStatus, h.Status.LastError)
	}
}

// awaitMachine waits until the tenant sees cond hold of its Machine, and returns it.
func (s *metalSite) awaitMachine(t *testing.T, name, what string, timeout time.Duration, cond func(*computev1alpha1.Machine) bool) *computev1alpha1.Machine {
	t.Helper()
	m := &computev1alpha1.Machine{}
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := s.as.Get(ctx, client.ObjectKey{Namespace: s.tenant, Name: name}, m); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cond(m), nil
	})
	if err != nil {
		t.Fatalf("Machine %s never %s; state %s, conditions %s", name, what, m.Status.State, conditions(m))
	}
	return m
}

// hostOf is the Host whose consumer is the tenant's Machine, or nil.
func (s *metalSite) hostOf(t *testing.T, ns, name string) *metalv1alpha1.Host {
	t.Helper()
	var hosts metalv1alpha1.HostList
	if err := env.Client.List(context.Background(), &hosts, client.InNamespace(s.infra)); err != nil {
		t.Fatal(err)
	}
	for i := range hosts.Items {
		if c := hosts.Items[i].Spec.ConsumerRef; c != nil && c.Namespace == ns && c.Name == name {
			return &hosts.Items[i]
		}
	}
	return nil
}

func conditions(m *computev1alpha1.Machine) string {
	var b strings.Builder
	for _, c := range m.Status.Conditions {
		fmt.Fprintf(&b, "[%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// unscheduled reports whether the Machine has no pool: its pool's runtime refused it
// (RuntimeRefused) or the scheduler found none (Unschedulable).
func unscheduled(m *computev1alpha1.Machine) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
	return c != nil && c.Status == metav1.ConditionFalse
}

func running(m *computev1alpha1.Machine) bool {
	return m.Status.State == computev1alpha1.MachineStateRunning
}

// The attack: a tenant keeps its Machine off the Hosts an expression excludes (tier
// reserved, a GPU Host) with matchExpressions. The poollet used to pass on matchLabels
// only, so the expression was dropped and the Machine landed on any free Host — with two
// Machines, certainly on an excluded one.
func TestTenantHostSelectorExpressionsHold(t *testing.T) {
	s := startMetalSite(t, map[string]map[string]string{
		"server-reserved": {"tier": "reserved"},
		"server-general":  {"tier": "general"},
		"server-gpu":      {"tier": "general", "gpu": "a100"},
	})
	ctx := context.Background()
	notReservedNoGPU := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"reserved"}},
		{Key: "gpu", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	for _, name := range []string{"first", "second"} {
		m := s.machine(name)
		m.Spec.HostSelector = notReservedNoGPU
		if err := s.as.Create(ctx, m); err != nil {
			t.Fatalf("creating Machine %s: %v", name, err)
		}
	}
	// One of them gets server-general; the other finds no Host its selector allows and is
	// refused, never placed on server-reserved or server-gpu.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		placed, refused := 0, 0
		for _, name := range []string{"first", "second"} {
			if h := s.hostOf(t, s.tenant, name); h != nil {
				if h.Name != "server-general" {
					t.Fatalf("Machine %s (hostSelector tier notin (reserved), !gpu) landed on Host %s labelled %v", name, h.Name, h.Labels)
				}
				placed++
			}
			m := &computev1alpha1.Machine{}
			if err := s.as.Get(ctx, client.ObjectKey{Namespace: s.tenant, Name: name}, m); err != nil {
				t.Fatal(err)
			}
			if unscheduled(m) {
				refused++
			}
		}
		if placed == 1 && refused == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes %d Machines placed and %d refused, want 1 and 1", placed, refused)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Still none on an excluded Host after the refused one was tried again.
	time.Sleep(5 * time.Second)
	for _, name := range []string{"first", "second"} {
		if h := s.hostOf(t, s.tenant, name); h != nil && h.Name != "server-general" {
			t.Fatalf("Machine %s landed on Host %s labelled %v", name, h.Name, h.Labels)
		}
	}
}

// countOfHosts is a number of Hosts, which a tenant's Machine never reads.
var countOfHosts = regexp.MustCompile(`\b\d+ (\w+ )?Hosts?\b`)

// The attack: a tenant probes the infrastructure through its Machines' refusals — a
// hostSelector matching nothing, a namespace no HostPolicy allows, a pool filled up — to
// learn the infrastructure namespace, Host names and how many Hosts there are. The
// messages named the namespace and counted the Hosts ("no HostPolicy in namespace
// infra-x lets namespace ... use the 2 Hosts"). Every message the tenant reads must say
// what the tenant can change, and nothing of those.
func TestTenantRefusalsNameNoInfrastructure(t *testing.T) {
	hosts := []string{"srv-alpha", "srv-beta"}
	s := startMetalSite(t, map[string]map[string]string{hosts[0]: {"rack": "r1"}, hosts[1]: {"rack": "r2"}})
	ctx := context.Background()
	outsiderNS := newNamespace(t, "outsider")
	outsider := tenant(t, "outsider-of-"+outsiderNS, outsiderNS)

	picky := s.machine("picky")
	picky.Spec.HostSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "nowhere"}}
	stranger := s.machine("stranger")
	stranger.Namespace = outsiderNS
	if err := s.as.Create(ctx, picky); err != nil {
		t.Fatal(err)
	}
	if err := outsider.Create(ctx, stranger); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		if err := s.as.Create(ctx, s.machine(name)); err != nil {
			t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return s.hostOf(t, s.tenant, "one") != nil && s.hostOf(t, s.tenant, "two") != nil, nil
	})
	if err != nil {
		t.Fatal("Machines one and two never got the two Hosts")
	}
	if err := s.as.Create(ctx, s.machine("three")); err != nil {
		t.Fatal(err)
	}

	// Read what each refused Machine says, as its tenant, until each was refused by the
	// pool (the runtime's words) and a while after (the scheduler's, quoting them).
	refused := []struct {
		c    client.Client
		ns   string
		name string
		says string
	}{
		{s.as, s.tenant, "picky", "hostSelector {rack=nowhere}"},
		{outsider, outsiderNS, "stranger", "namespace " + outsiderNS},
		// The pool is full: the scheduler (insufficient capacity) or the runtime (every Host
		// in use) refuses it, whichever sees it first.
		{s.as, s.tenant, "three", ""},
	}
	seen := map[string]bool{}
	heard := make([]bool, len(refused))
	deadline := time.Now().Add(2 * time.Minute)
	for quiet := 0; quiet < 20; {
		all := true
		for i, r := range refused {
			m := &computev1alpha1.Machine{}
			if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name}, m); err != nil {
				t.Fatal(err)
			}
			for _, c := range m.Status.Conditions {
				seen[fmt.Sprintf("%s/%s %s=%s %s: %s", r.ns, r.name, c.Type, c.Status, c.Reason, c.Message)] = true
				if c.Type == computev1alpha1.ConditionScheduled && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, r.says) {
					heard[i] = true
				}
			}
			all = all && heard[i]
		}
		if all {
			quiet++
		} else if time.Now().After(deadline) {
			t.Fatalf("not every Machine was refused with what it can change (%v); seen:\n%s", heard, strings.Join(slices.Sorted(maps.Keys(seen)), "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}
	for msg := range seen {
		var leaks []string
		if strings.Contains(msg, s.infra) {
			leaks = append(leaks, "the infrastructure namespace "+s.infra)
		}
		for _, h := range hosts {
			if strings.Contains(msg, h) {
				leaks = append(leaks, "Host "+h)
			}
		}
		if c := countOfHosts.FindString(msg); c != "" {
			leaks = append(leaks, "a count of Hosts ("+c+")")
		}
		if len(leaks) > 0 {
			t.Errorf("the tenant reads %v in: %s", leaks, msg)
		}
	}
	for _, r := range refused {
		if h := s.hostOf(t, r.ns, r.name); h != nil {
			t.Errorf("refused Machine %s/%s holds Host %s", r.ns, r.name, h.Name)
		}
	}
}

// The attack: someone who may create Machines in the infrastructure namespace (a
// HostPolicy lets that namespace use the Hosts) but not write HardwareData names a Machine
// after another Host. The metal runtime wrote the tenant's view of the Machine's Host as
// HardwareData <namespace>/<Machine name> — there, the other Host's own inventory — so the
// other Host's HardwareData was replaced with this one's, then deleted with the Machine.
func TestMachineInInfrastructureNamespaceCannotOverwriteHardwareData(t *testing.T) {
	s := startMetalSite(t, map[string]map[string]string{"srv-used": {"rack": "r1"}, "srv-victim": {"rack": "r2"}})
	ctx := context.Background()
	create(t, env.Client, &metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.infra, Name: "own-namespace"},
		Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{s.infra}}})
	attacker := tenant(t, "ops-bot-of-"+s.infra, s.infra)

	victim := &metalv1alpha1.HardwareData{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: s.infra, Name: "srv-victim"}, victim) == nil, nil
	})
	if err != nil {
		t.Fatal("Host srv-victim has no HardwareData after inspection")
	}
	m := s.machine("srv-victim")
	m.Namespace = s.infra
	m.Spec.HostSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}} // lands on srv-used
	if err := attacker.Create(ctx, m); err != nil {
		t.Fatalf("creating Machine srv-victim in the infrastructure namespace: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &computev1alpha1.Machine{}
		if err := attacker.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			return false, err
		}
		return running(got), nil
	})
	if err != nil {
		t.Fatalf("the Machine never ran: %v", err)
	}
	if h := s.hostOf(t, s.infra, "srv-victim"); h == nil || h.Name != "srv-used" {
		t.Fatalf("the Machine is not on srv-used: %v", h)
	}
	// Give the runtime time to write the view it writes once the Host is provisioned.
	time.Sleep(5 * time.Second)
	check := func(when string) {
		t.Helper()
		got := &metalv1alpha1.HardwareData{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(victim), got); err != nil {
			t.Fatalf("%s: Host srv-victim's HardwareData: %v", when, err)
		}
		if !equality.Semantic.DeepEqual(got.Spec, victim.Spec) || !equality.Semantic.DeepEqual(got.OwnerReferences, victim.OwnerReferences) ||
			!equality.Semantic.DeepEqual(got.Annotations, victim.Annotations) {
			t.Fatalf("%s: Host srv-victim's HardwareData was rewritten: owners %v annotations %v spec %+v (was %+v)",
				when, got.OwnerReferences, got.Annotations, got.Spec, victim.Spec)
		}
	}
	check("while the Machine runs")
	if err := attacker.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &computev1alpha1.Machine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the Machine was not deleted: %v", err)
	}
	check("after the Machine is gone")
}

// The attack: a tenant gives its Machine binary user data (gzip), which a server's config
// drive cannot carry (Ironic takes it as a JSON string). The metal runtime claimed a Host
// for it and the deploy failed there, holding a server and retrying; the refusal must
// come at create, before any Host is claimed, and say what to change.
func TestTenantBinaryUserDataRefusedBeforeAHost(t *testing.T) {
	s := startMetalSite(t, map[string]map[string]string{"srv-only": {"rack": "r1"}})
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.tenant, Name: "gzipped"},
		Data: map[string][]byte{"userData": {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xca, 0xfe}}}
	if err := s.as.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	m := s.machine("binary")
	m.Spec.UserDataRef = &computev1alpha1.SecretKeySelector{Name: secret.Name}
	if err := s.as.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	var said string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if h := s.hostOf(t, s.tenant, m.Name); h != nil {
			return false, fmt.Errorf("Host %s was claimed for the Machine with binary user data", h.Name)
		}
		got := &computev1alpha1.Machine{}
		if err := s.as.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, computev1alpha1.ConditionScheduled)
		if c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "not UTF-8 text") {
			said = c.Message
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		got := &computev1alpha1.Machine{}
		_ = s.as.Get(ctx, client.ObjectKeyFromObject(m), got)
		t.Fatalf("%v; the Machine says %s", err, conditions(got))
	}
	// And it stays so: the scheduler tries the pool again after a while; it never gets a Host.
	for range 20 {
		if h := s.hostOf(t, s.tenant, m.Name); h != nil {
			t.Fatalf("Host %s was claimed for the Machine with binary user data", h.Name)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("the Machine says: %s", said)
}
