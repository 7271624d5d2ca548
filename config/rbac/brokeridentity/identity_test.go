package brokeridentity_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac/brokeridentity"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/runtime/broker/mapping"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// How the API server must answer a request of the broker's.
type answer int

const (
	allowed answer = iota
	// refusedByRBAC: 403 from the authorizer (the broker's roles do not cover it).
	refusedByRBAC
	// refusedByScope: refused by anvil-broker-scope (its roles allow it; the object is not
	// labelled with the broker's pool).
	refusedByScope
	// refusedByBinding: refused by anvil-machine-binding (no bind verb on the pool).
	refusedByBinding
)

func (a answer) String() string {
	return [...]string{"allowed", "refused by RBAC", "refused by anvil-broker-scope", "refused by anvil-machine-binding"}[a]
}

// request is one thing the broker's credentials try.
type request struct {
	what string
	want answer
	do   func(ctx context.Context) error
}

// check makes each request, logs the API server's answer, and fails the test when a
// request is not answered as want says: an attack let through, or refused by another rule
// than the one it checks (so loosening that rule fails the test even when another would
// still refuse), or something a broker needs refused.
func check(t *testing.T, pool string, requests []request) {
	t.Helper()
	ctx := context.Background()
	for _, r := range requests {
		err := r.do(ctx)
		got := "allowed"
		if err != nil {
			got = fmt.Sprintf("%s: %v", apierrors.ReasonForError(err), err)
		}
		t.Logf("broker %s: %-75s -> %s", pool, r.what, got)
		if problem := judge(r.want, err, pool); problem != "" {
			t.Errorf("%s: %v; want it %s (%s)", r.what, err, r.want, problem)
		}
	}
}

// judge says what is wrong with err as the answer to a request that should get want, or "".
func judge(want answer, err error, pool string) string {
	if want == allowed {
		if err != nil {
			return "refused"
		}
		return ""
	}
	if err == nil {
		return "allowed"
	}
	msg := err.Error()
	scope := strings.Contains(msg, "ValidatingAdmissionPolicy 'anvil-broker-scope'") &&
		strings.Contains(msg, "the broker of pool "+pool+" may not")
	binding := strings.Contains(msg, "ValidatingAdmissionPolicy 'anvil-machine-binding'") && strings.Contains(msg, "needs the bind verb")
	switch want {
	case refusedByRBAC:
		if !apierrors.IsForbidden(err) || scope || binding {
			return "not the authorizer's 403"
		}
	case refusedByScope:
		if !scope {
			return "not anvil-broker-scope's refusal naming the pool"
		}
	case refusedByBinding:
		if !binding {
			return "not anvil-machine-binding's refusal"
		}
	}
	return ""
}

// broker is a broker's identity made by brokeridentity.Identity and clients acting with it.
type broker struct {
	pool, ns string
	config   *rest.Config
	c        client.WithWatch
}

// newBroker makes the identity of the broker of a new pool in a new namespace, and waits
// until the API server's authorizer and admission plugin know its roles and policy.
func newBroker(t *testing.T, name string) *broker {
	t.Helper()
	ctx := context.Background()
	b := &broker{pool: "up-" + name, ns: "site-" + name}
	cfg, err := brokeridentity.Identity(ctx, env.Config, b.ns, b.pool, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "" || cfg.Password != "" || cfg.CertData != nil || cfg.KeyData != nil || cfg.CertFile != "" ||
		cfg.Impersonate.UserName != "" || cfg.BearerToken == "" || cfg.CAData == nil {
		t.Fatalf("Identity's config carries more than the broker's token and the CA: %+v", cfg)
	}
	b.config = cfg
	if b.c, err = client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme}); err != nil {
		t.Fatal(err)
	}
	// The RoleBinding and the policy reach the authorizer's and admission's caches a moment
	// after they are written: wait for a read the Role allows and a write the policy refuses.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		if b.c.List(ctx, &computev1alpha1.MachineList{}, client.InNamespace(b.ns)) != nil {
			return false, nil
		}
		err := b.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, GenerateName: "probe-"}})
		return judge(refusedByScope, err, b.pool) == "", nil
	}); err != nil {
		t.Fatalf("the broker's roles and anvil-broker-scope did not take effect: %v", err)
	}
	return b
}

// create makes objs as the admin.
func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func labelled(pool string) map[string]string { return map[string]string{mapping.LabelPool: pool} }

func secret(ns, name string, labels map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		StringData: map[string]string{"userData": "#cloud-config\n"}}
}

func machine(ns, name string, labels map[string]string) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
			Image: "registry.example/os@sha256:" + strings.Repeat("0", 64)}}
}

// The attack: the broker's downstream credentials (a kubeconfig a site's anvil handed a
// region; the region's broker host, compromised) reach for the site's BMC credentials and
// tenants' Secrets in other namespaces, Hosts, HardwareData and HostPolicies anywhere, the
// pools, other namespaces' Machines, the other Secrets and Machines of its own namespace
// (an admin's, another broker's), a Machine pinned past the scheduler's tenancy, and ways
// to widen its rights. Each is refused by the rule that is meant to refuse it.
func TestBrokerCredentialsReachOnlyItsOwnObjects(t *testing.T) {
	b := newBroker(t, "attack")
	pool, ns := b.pool, b.ns
	tenant, infra := "tenant-attack", "infra-attack"
	closed := "closed-attack" // a downstream pool whose tenants exclude the broker's namespace
	create(t, namespace(tenant), namespace(infra),
		secret(infra, "bmc", nil),
		// Carrying the broker's label does not bring a Secret or Machine of another
		// namespace within reach.
		secret(tenant, "user-data", labelled(pool)),
		machine(tenant, "victim", labelled(pool)),
		// Its own namespace's objects it did not make.
		secret(ns, "admins", nil),
		secret(ns, "other-brokers", labelled("up-other")),
		machine(ns, "admins", nil),
		machine(ns, "other-brokers", labelled("up-other")),
		// Its own, as it made them (the admin makes them here: the positive test has the
		// broker make its own).
		secret(ns, "mine", labelled(pool)),
		machine(ns, "mine", labelled(pool)),
		// A disk and a NIC of its namespace no Machine holds (an admin's).
		&computev1alpha1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admins"},
			Spec: computev1alpha1.VolumeSpec{Size: resource.MustParse("1Gi")}},
		&computev1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admins"},
			Spec: computev1alpha1.NetworkInterfaceSpec{Network: "management"}},
		&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: closed},
			Spec: computev1alpha1.MachinePoolSpec{Tenants: &computev1alpha1.TenantPolicy{Namespaces: []string{tenant}}}},
	)
	for _, n := range []string{ns, infra} {
		create(t,
			&metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "server"},
				Spec: metalv1alpha1.HostSpec{BMC: metalv1alpha1.BMC{Address: "fake://server"}, BootMACAddress: "52:54:00:00:00:01",
					Architecture: computev1alpha1.ArchitectureAMD64}},
			&metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "all"},
				Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{ns}}},
			&metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "server"}})
	}

	get := func(o client.Object, ns, name string) func(context.Context) error {
		return func(ctx context.Context) error { return b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o) }
	}
	list := func(l client.ObjectList, opts ...client.ListOption) func(context.Context) error {
		return func(ctx context.Context) error { return b.c.List(ctx, l, opts...) }
	}
	createAs := func(o client.Object) func(context.Context) error {
		return func(ctx context.Context) error { return b.c.Create(ctx, o) }
	}
	deleteAs := func(o client.Object) func(context.Context) error {
		return func(ctx context.Context) error { return b.c.Delete(ctx, o) }
	}
	// patch changes o (read afresh by the admin, so the broker's reads play no part) with
	// change, as the broker; status patches the status subresource.
	patch := func(o client.Object, status bool, change func(client.Object)) func(context.Context) error {
		return func(ctx context.Context) error {
			cur := o.DeepCopyObject().(client.Object)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			p := client.MergeFrom(cur.DeepCopyObject().(client.Object))
			change(cur)
			if status {
				return b.c.Status().Patch(ctx, cur, p)
			}
			return b.c.Patch(ctx, cur, p)
		}
	}
	setLabel := func(value string) func(client.Object) {
		return func(o client.Object) {
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[mapping.LabelPool] = value
			o.SetLabels(l)
		}
	}
	dropLabel := func(o client.Object) {
		l := o.GetLabels()
		delete(l, mapping.LabelPool)
		o.SetLabels(l)
	}
	annotate := func(o client.Object) { o.SetAnnotations(map[string]string{"broker.anvil.dev/record": "{}"}) }
	withVolume, withNIC := machine(ns, "with-volume", labelled(pool)), machine(ns, "with-nic", labelled(pool))
	withVolume.Spec.Volumes = []computev1alpha1.MachineVolume{{Name: "data", VolumeRef: &computev1alpha1.LocalObjectReference{Name: "admins"}}}
	withNIC.Spec.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{{Name: "mgmt",
		NetworkInterfaceRef: &computev1alpha1.LocalObjectReference{Name: "admins"}}}
	pinned := machine(ns, "pinned", labelled(pool))
	pinned.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: closed}

	requests := []request{
		// Secrets outside its namespace: the BMC credentials, a tenant's first-boot data.
		{"get the BMC Secret " + infra + "/bmc", refusedByRBAC, get(&corev1.Secret{}, infra, "bmc")},
		{"get Secret " + tenant + "/user-data (labelled with its pool)", refusedByRBAC, get(&corev1.Secret{}, tenant, "user-data")},
		{"list Secrets of " + infra, refusedByRBAC, list(&corev1.SecretList{}, client.InNamespace(infra))},
		{"list Secrets of every namespace", refusedByRBAC, list(&corev1.SecretList{})},
		{"watch Secrets of every namespace", refusedByRBAC, watchWith(b.c, &corev1.SecretList{})},
		{"list Secrets of " + tenant + " by its label", refusedByRBAC, list(&corev1.SecretList{}, client.InNamespace(tenant), client.MatchingLabels(labelled(pool)))},
		{"create a labelled Secret in " + tenant, refusedByRBAC, createAs(secret(tenant, "planted", labelled(pool)))},
		{"patch Secret " + tenant + "/user-data", refusedByRBAC, patch(secret(tenant, "user-data", nil), false, annotate)},
		{"delete Secret " + tenant + "/user-data", refusedByRBAC, deleteAs(secret(tenant, "user-data", nil))},
		// Secrets of its own namespace it did not make.
		{"create a Secret without the label in " + ns, refusedByScope, createAs(secret(ns, "unlabelled", nil))},
		{"create a Secret labelled with another pool", refusedByScope, createAs(secret(ns, "as-other", labelled("up-other")))},
		{"patch the admin's Secret " + ns + "/admins", refusedByScope, patch(secret(ns, "admins", nil), false, annotate)},
		{"take over the admin's Secret by labelling it", refusedByScope, patch(secret(ns, "admins", nil), false, setLabel(pool))},
		{"delete the admin's Secret", refusedByScope, deleteAs(secret(ns, "admins", nil))},
		{"patch another broker's Secret", refusedByScope, patch(secret(ns, "other-brokers", nil), false, annotate)},
		{"delete another broker's Secret", refusedByScope, deleteAs(secret(ns, "other-brokers", nil))},
		{"give its own Secret to another pool", refusedByScope, patch(secret(ns, "mine", nil), false, setLabel("up-other"))},
		{"drop the label from its own Secret", refusedByScope, patch(secret(ns, "mine", nil), false, dropLabel)},
		{"delete all Secrets of " + ns + " at once", refusedByRBAC, func(ctx context.Context) error {
			return b.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns))
		}},
		// The infrastructure: Hosts, HardwareData, HostPolicies, in its namespace and another.
		{"list Hosts of every namespace", refusedByRBAC, list(&metalv1alpha1.HostList{})},
		{"list HardwareData of every namespace", refusedByRBAC, list(&metalv1alpha1.HardwareDataList{})},
		{"list HostPolicies of every namespace", refusedByRBAC, list(&metalv1alpha1.HostPolicyList{})},
		{"get Host " + ns + "/server", refusedByRBAC, get(&metalv1alpha1.Host{}, ns, "server")},
		{"get Host " + infra + "/server", refusedByRBAC, get(&metalv1alpha1.Host{}, infra, "server")},
		{"list Hosts of " + ns, refusedByRBAC, list(&metalv1alpha1.HostList{}, client.InNamespace(ns))},
		{"create a Host in " + ns, refusedByRBAC, createAs(&metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"},
			Spec: metalv1alpha1.HostSpec{BMC: metalv1alpha1.BMC{Address: "fake://planted"}, BootMACAddress: "52:54:00:00:00:02",
				Architecture: computev1alpha1.ArchitectureAMD64}})},
		{"patch Host " + infra + "/server", refusedByRBAC, patch(&metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "server"}}, false, annotate)},
		{"get HardwareData " + ns + "/server", refusedByRBAC, get(&metalv1alpha1.HardwareData{}, ns, "server")},
		{"get HardwareData " + infra + "/server", refusedByRBAC, get(&metalv1alpha1.HardwareData{}, infra, "server")},
		{"list HardwareData of " + ns, refusedByRBAC, list(&metalv1alpha1.HardwareDataList{}, client.InNamespace(ns))},
		{"create HardwareData in " + ns, refusedByRBAC, createAs(&metalv1alpha1.HardwareData{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"}})},
		{"get HostPolicy " + ns + "/all", refusedByRBAC, get(&metalv1alpha1.HostPolicy{}, ns, "all")},
		{"list HostPolicies of " + infra, refusedByRBAC, list(&metalv1alpha1.HostPolicyList{}, client.InNamespace(infra))},
		{"widen HostPolicy " + infra + "/all", refusedByRBAC, patch(&metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: infra, Name: "all"}}, false,
			func(o client.Object) {
				o.(*metalv1alpha1.HostPolicy).Spec.Namespaces = append(o.(*metalv1alpha1.HostPolicy).Spec.Namespaces, "*")
			})},
		// The pools: read, never written.
		{"create a MachinePool", refusedByRBAC, createAs(&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "planted-attack"}})},
		{"let its namespace into pool " + closed, refusedByRBAC, patch(&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: closed}}, false, func(o client.Object) {
			o.(*computev1alpha1.MachinePool).Spec.Tenants.Namespaces = append(o.(*computev1alpha1.MachinePool).Spec.Tenants.Namespaces, ns)
		})},
		{"patch the status of pool " + closed, refusedByRBAC, patch(&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: closed}}, true, annotate)},
		{"delete pool " + closed, refusedByRBAC, deleteAs(&computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: closed}})},
		// Machines of another namespace, labelled as its own.
		{"get Machine " + tenant + "/victim", refusedByRBAC, get(&computev1alpha1.Machine{}, tenant, "victim")},
		{"list Machines of every namespace", refusedByRBAC, list(&computev1alpha1.MachineList{})},
		{"create a Machine in " + tenant, refusedByRBAC, createAs(machine(tenant, "planted", labelled(pool)))},
		{"patch Machine " + tenant + "/victim", refusedByRBAC, patch(machine(tenant, "victim", nil), false, annotate)},
		{"delete Machine " + tenant + "/victim", refusedByRBAC, deleteAs(machine(tenant, "victim", nil))},
		// Machines of its own namespace it did not make, and past the scheduler.
		{"create a Machine without the label", refusedByScope, createAs(machine(ns, "unlabelled", nil))},
		{"patch the admin's Machine " + ns + "/admins", refusedByScope, patch(machine(ns, "admins", nil), false, annotate)},
		{"delete another broker's Machine", refusedByScope, deleteAs(machine(ns, "other-brokers", nil))},
		{"create a Machine attaching the admin's Volume (volumeRef)", refusedByScope, createAs(withVolume)},
		{"create a Machine attaching the admin's NetworkInterface (networkInterfaceRef)", refusedByScope, createAs(withNIC)},
		{"attach the admin's Volume to its own Machine", refusedByScope, patch(machine(ns, "mine", nil), false, func(o client.Object) {
			o.(*computev1alpha1.Machine).Spec.Volumes = withVolume.Spec.Volumes
		})},
		{"create a Machine pinned to pool " + closed + " (not open to " + ns + ")", refusedByBinding, createAs(pinned)},
		{"write the status of Machine " + ns + "/admins", refusedByRBAC, patch(machine(ns, "admins", nil), true, func(o client.Object) {
			o.(*computev1alpha1.Machine).Status.State = computev1alpha1.MachineStateRunning
		})},
		// Volumes and NetworkInterfaces: the downstream ephemeral controller makes them.
		{"create a Volume in " + ns, refusedByRBAC, createAs(&computev1alpha1.Volume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}})},
		{"create a NetworkInterface in " + ns, refusedByRBAC, createAs(&computev1alpha1.NetworkInterface{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}})},
		{"list Volumes of " + tenant, refusedByRBAC, list(&computev1alpha1.VolumeList{}, client.InNamespace(tenant))},
		// Nodes, namespaces, classes, events elsewhere.
		{"list Nodes", refusedByRBAC, list(&corev1.NodeList{})},
		{"create a namespace", refusedByRBAC, createAs(namespace("planted-attack"))},
		{"delete namespace " + tenant, refusedByRBAC, deleteAs(namespace(tenant))},
		{"label its own namespace", refusedByRBAC, patch(namespace(ns), false, annotate)},
		{"create a MachineClass", refusedByRBAC, createAs(&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "planted-attack"}})},
		{"create an Event in " + tenant, refusedByRBAC, createAs(event(tenant))},
		// Widening its own rights.
		{"bind itself cluster-admin in " + ns, refusedByRBAC, createAs(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "escalate"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "anvil-broker-" + pool}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}})},
		{"ask for a token of another ServiceAccount", refusedByRBAC, func(ctx context.Context) error {
			return b.c.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
				&authenticationv1.TokenRequest{})
		}},
		{"impersonate an admin", refusedByRBAC, func(ctx context.Context) error {
			cfg := rest.CopyConfig(b.config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "admin", Groups: []string{"system:masters"}}
			// The broker's own mapper: discovery as the admin is refused too, and would hide
			// the answer to the request itself.
			c, err := client.New(cfg, client.Options{Scheme: env.Scheme, Mapper: b.c.RESTMapper()})
			if err != nil {
				return err
			}
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(infra))
		}},
	}
	check(t, pool, requests)
	// What the attempts above must have left as it was.
	for _, o := range []client.Object{secret(infra, "bmc", nil), secret(ns, "admins", nil), secret(ns, "other-brokers", nil),
		machine(tenant, "victim", nil), machine(ns, "other-brokers", nil), namespace(tenant)} {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Errorf("%T %s/%s after the attack: %v (deleting: %v)", o, o.GetNamespace(), o.GetName(), err, o.GetDeletionTimestamp() != nil)
		}
	}
}

// watchWith starts a watch of l with c and stops it: the answer is the API server's to
// starting it.
func watchWith(c client.WithWatch, l client.ObjectList, opts ...client.ListOption) func(context.Context) error {
	return func(ctx context.Context) error {
		w, err := c.Watch(ctx, l, opts...)
		if err == nil {
			w.Stop()
		}
		return err
	}
}

// event is an Event about a Machine of ns, as a broker would write one.
func event(ns string) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "broker-"},
		EventTime: metav1.NowMicro(), ReportingController: "anvil.dev/broker", ReportingInstance: "broker",
		Action: "Create", Reason: "Created", Type: corev1.EventTypeNormal, Note: "downstream Machine made",
		Regarding: corev1.ObjectReference{APIVersion: computev1alpha1.GroupVersion.String(), Kind: "Machine", Namespace: ns, Name: "m"}}
}

// What a broker does with its downstream credentials works with them alone: its Secrets
// and Machines made, read, watched, patched and deleted; the pools and classes read; its
// Machines' Volumes and NetworkInterfaces read; Events written.
func TestBrokerCredentialsDoWhatABrokerNeeds(t *testing.T) {
	b := newBroker(t, "needs")
	pool, ns := b.pool, b.ns
	create(t, &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "open-needs"}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "class-needs"},
			Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}})
	mySecret, myMachine := secret(ns, "0d6c1a52-uid", labelled(pool)), machine(ns, "0d6c1a52-uid", labelled(pool))
	// As the broker maps an upstream Machine: a root disk from the image, an empty disk and
	// a NIC as templates the site's ephemeral controller makes.
	myMachine.Spec.MachinePoolSelector = map[string]string{"site": "s1"}
	myMachine.Spec.Volumes = []computev1alpha1.MachineVolume{{Name: "root", Image: &computev1alpha1.ImageDiskSource{}},
		{Name: "data", Ephemeral: &computev1alpha1.EphemeralVolumeSource{VolumeTemplate: computev1alpha1.VolumeTemplate{
			Spec: computev1alpha1.VolumeSpec{Size: resource.MustParse("1Gi")}}}}}
	myMachine.Spec.NetworkInterfaces = []computev1alpha1.MachineNetworkInterface{{Name: "mgmt",
		Ephemeral: &computev1alpha1.EphemeralNetworkInterfaceSource{NetworkInterfaceTemplate: computev1alpha1.NetworkInterfaceTemplate{
			Spec: computev1alpha1.NetworkInterfaceSpec{Network: "management"}}}}}
	record := func(o client.Object) func(context.Context) error {
		return func(ctx context.Context) error {
			p := client.MergeFrom(o.DeepCopyObject().(client.Object))
			o.SetAnnotations(map[string]string{"broker.anvil.dev/record": `{"generation":2}`})
			return b.c.Patch(ctx, o, p)
		}
	}
	mine := client.MatchingLabels(labelled(pool))
	requests := []request{
		{"create its Secret", allowed, func(ctx context.Context) error { return b.c.Create(ctx, mySecret) }},
		{"get its Secret", allowed, func(ctx context.Context) error {
			return b.c.Get(ctx, client.ObjectKeyFromObject(mySecret), &corev1.Secret{})
		}},
		{"list its Secrets by label", allowed, func(ctx context.Context) error {
			return b.c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns), mine)
		}},
		{"watch its Secrets by label", allowed, watchWith(b.c, &corev1.SecretList{}, client.InNamespace(ns), mine)},
		{"patch its Secret", allowed, record(mySecret)},
		{"create its Machine", allowed, func(ctx context.Context) error { return b.c.Create(ctx, myMachine) }},
		{"list its Machines by label", allowed, func(ctx context.Context) error {
			return b.c.List(ctx, &computev1alpha1.MachineList{}, client.InNamespace(ns), mine)
		}},
		{"watch its Machines", allowed, watchWith(b.c, &computev1alpha1.MachineList{}, client.InNamespace(ns), mine)},
		{"write its record on its Machine", allowed, record(myMachine)},
		{"list MachinePools", allowed, func(ctx context.Context) error { return b.c.List(ctx, &computev1alpha1.MachinePoolList{}) }},
		{"watch MachinePools", allowed, watchWith(b.c, &computev1alpha1.MachinePoolList{})},
		{"get MachinePool open-needs", allowed, func(ctx context.Context) error {
			return b.c.Get(ctx, client.ObjectKey{Name: "open-needs"}, &computev1alpha1.MachinePool{})
		}},
		{"list MachineClasses", allowed, func(ctx context.Context) error { return b.c.List(ctx, &computev1alpha1.MachineClassList{}) }},
		{"get MachineClass class-needs", allowed, func(ctx context.Context) error {
			return b.c.Get(ctx, client.ObjectKey{Name: "class-needs"}, &computev1alpha1.MachineClass{})
		}},
		{"list Volumes of " + ns, allowed, func(ctx context.Context) error {
			return b.c.List(ctx, &computev1alpha1.VolumeList{}, client.InNamespace(ns))
		}},
		{"list NetworkInterfaces of " + ns, allowed, func(ctx context.Context) error {
			return b.c.List(ctx, &computev1alpha1.NetworkInterfaceList{}, client.InNamespace(ns))
		}},
		{"list its Machines with a kubeconfig file written from the identity", allowed, func(ctx context.Context) error {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			if err := controlplane.WriteKubeconfig(path, b.config); err != nil {
				return err
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
			if err != nil {
				return err
			}
			return c.List(ctx, &computev1alpha1.MachineList{}, client.InNamespace(ns), mine)
		}},
		{"create an Event in " + ns, allowed, func(ctx context.Context) error { return b.c.Create(ctx, event(ns)) }},
		{"delete its Machine", allowed, func(ctx context.Context) error { return b.c.Delete(ctx, myMachine) }},
		{"delete its Secret", allowed, func(ctx context.Context) error { return b.c.Delete(ctx, mySecret) }},
	}
	check(t, pool, requests)
}

// Identity refuses a pool that cannot name a ServiceAccount and label the broker's objects,
// naming the fix, before it installs anything.
func TestIdentityRefusesAPoolItCannotName(t *testing.T) {
	for _, pool := range []string{"", "Upper", "a/b", strings.Repeat("p", 64)} {
		_, err := brokeridentity.Identity(context.Background(), env.Config, "site-badpool", pool, 0)
		if err == nil || !strings.Contains(err.Error(), "broker pool") {
			t.Errorf("Identity(pool %q) = %v, want an error naming the broker pool", pool, err)
		}
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "site-badpool"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace site-badpool after refused pools: %v, want NotFound (nothing installed)", err)
	}
}
