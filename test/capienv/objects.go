package capienv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// KubernetesVersion is the version the Machines made here ask for: Cluster API requires
// one; without a bootstrap provider nothing reads it.
const KubernetesVersion = "v1.36.3"

// Endpoint is the control plane endpoint of the apiserver cfg reaches (https://HOST:PORT).
func Endpoint(cfg *rest.Config) (clusterv1.APIEndpoint, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("apiserver address %q: %w", cfg.Host, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("apiserver address %q: %w", cfg.Host, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return clusterv1.APIEndpoint{}, fmt.Errorf("apiserver address %q: bad port: %w", cfg.Host, err)
	}
	return clusterv1.APIEndpoint{Host: host, Port: int32(p)}, nil
}

// Cluster is a Cluster on an AnvilCluster whose control plane endpoint is endpoint, after
// the objects to create first: the workload cluster's kubeconfig Secret (<name>-kubeconfig,
// key value), through which Cluster API reaches the cluster's Nodes, and the AnvilCluster.
func Cluster(ns, name string, kubeconfig []byte, endpoint clusterv1.APIEndpoint) (*clusterv1.Cluster, []client.Object) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilCluster", Name: name}}}
	return cluster, []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": kubeconfig}},
		&infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: infrav1.AnvilClusterSpec{ControlPlaneEndpoint: endpoint}},
		cluster,
	}
}

// BootstrapSecret is a bootstrap data Secret as a user without a bootstrap provider writes
// one, for the Machines of cluster that name it: value is the first-boot data (a
// cloud-config, or a script a guest runs), in format cloud-config. The provider boots it
// because it is labelled as the cluster's bootstrap data (infrav1.LabelBootstrapData).
func BootstrapSecret(cluster *clusterv1.Cluster, name string, value []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name, infrav1.LabelBootstrapData: cluster.Name}},
		Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": value, "format": []byte("cloud-config")}}
}

// ControlPlaneMachine is one control-plane Machine of cluster and its AnvilMachine of spec,
// booting the bootstrap Secret named bootstrap. With no control-plane provider, the
// Cluster's control plane is initialized once this Machine has a Node.
func ControlPlaneMachine(cluster *clusterv1.Cluster, name, bootstrap string, spec infrav1.AnvilMachineSpec) []client.Object {
	am := &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}}, Spec: spec}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name, clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster.Name, Version: KubernetesVersion,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(bootstrap)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachine", Name: name}}}
	return []client.Object{am, m}
}

// MachineDeployment is a MachineDeployment of cluster with replicas Machines in failure
// domain zone (empty: none), each booting the bootstrap Secret named bootstrap, and the
// AnvilMachineTemplate of spec it names (create the template first). Its Machines carry
// the label deployment=<name>, which its selector matches.
func MachineDeployment(cluster *clusterv1.Cluster, name, bootstrap, zone string, spec infrav1.AnvilMachineSpec, replicas int32) (*clusterv1.MachineDeployment, *infrav1.AnvilMachineTemplate) {
	tmpl := &infrav1.AnvilMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace},
		Spec: infrav1.AnvilMachineTemplateSpec{Template: infrav1.AnvilMachineTemplateResource{Spec: spec}}}
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster.Name, "deployment": name}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: cluster.Name, Replicas: new(replicas),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{ClusterName: cluster.Name, Version: KubernetesVersion, FailureDomain: zone,
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(bootstrap)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachineTemplate", Name: name}}}}}
	return md, tmpl
}

// Namespace makes a namespace named prefix-<random> for one test and returns its name.
func Namespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// Create creates objs in order, naming the one that fails.
func Create(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// MachinesOf lists the Cluster API Machines of a MachineDeployment.
func MachinesOf(ctx context.Context, c client.Client, md *clusterv1.MachineDeployment) ([]clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	err := c.List(ctx, list, client.InNamespace(md.Namespace), client.MatchingLabels(md.Spec.Selector.MatchLabels))
	return list.Items, err
}

// Scale sets a MachineDeployment's replicas.
func Scale(ctx context.Context, c client.Client, md *clusterv1.MachineDeployment, replicas int32) error {
	cur := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(md), cur); err != nil {
		return err
	}
	base := cur.DeepCopy()
	cur.Spec.Replicas = new(replicas)
	if err := c.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("scaling MachineDeployment %s to %d: %w", md.Name, replicas, err)
	}
	return nil
}

// Healthy says why a Machine is not yet Running with a nodeRef and NodeHealthy True, or nil.
func Healthy(m *clusterv1.Machine) error {
	if m.Status.Phase != string(clusterv1.MachinePhaseRunning) {
		return fmt.Errorf("Machine %s is %q", m.Name, m.Status.Phase)
	}
	if m.Status.NodeRef.Name == "" {
		return fmt.Errorf("Machine %s has no nodeRef", m.Name)
	}
	if c := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineNodeHealthyCondition); c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("Machine %s NodeHealthy: %+v", m.Name, c)
	}
	return nil
}

// Eventually polls check every 200 ms until it returns nil, failing the test with its last
// error after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(timeout, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Poll calls check every 200 ms until it returns nil, or returns its last error after
// timeout: Eventually for set-up code that reports errors rather than failing a test.
func Poll(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Events counts the Events of one reason about the object kind/name in ns (a repeated Event
// by its count).
func Events(t testing.TB, c client.Client, ns, kind, name, reason string) int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == kind && e.Reason == reason {
			n += max(int(e.DeprecatedCount), 1)
		}
	}
	return n
}
