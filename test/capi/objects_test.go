package capi_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/capienv"
)

const bootstrapSecret = "boot"

// newCluster makes a Cluster on an AnvilCluster whose control plane endpoint is the rig's
// workload apiserver, that apiserver's kubeconfig Secret, and a bootstrap data Secret the
// Machines name (there is no bootstrap provider: the data is a plain cloud-config).
func newCluster(t testing.TB, r *rig, ns, name string) *clusterv1.Cluster {
	t.Helper()
	return newClusterWithIdentity(t, r, ns, name, nil, "")
}

// newClusterWithIdentity is newCluster whose AnvilCluster, when identity is set, names a
// Secret holding that kubeconfig in spec.identityRef; its bootstrap data Secret then carries
// the move label (a bootstrap provider's Secret would be owned by its config, owned by the
// Machine, and move with it).
func newClusterWithIdentity(t testing.TB, r *rig, ns, name string, identity []byte, tenant string) *clusterv1.Cluster {
	t.Helper()
	endpoint, err := capienv.Endpoint(r.workload.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cluster, objs := capienv.Cluster(ns, name, r.kubeconfig, endpoint)
	boot := capienv.BootstrapSecret(cluster, bootstrapSecret, []byte("#cloud-config\n"))
	if identity != nil {
		objs = capienv.WithIdentity(cluster, objs, identity, tenant)
		boot.Labels[infrav1.LabelMove] = ""
	}
	if err := capienv.Create(context.Background(), env.Client, append([]client.Object{boot}, objs...)...); err != nil {
		t.Fatal(err)
	}
	return cluster
}

// machineSpec is the AnvilMachine of the rig's image for arch.
func machineSpec(r *rig, arch computev1alpha1.Architecture) infrav1.AnvilMachineSpec {
	return infrav1.AnvilMachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"},
		Image: r.image, Architecture: arch}
}

// newControlPlaneMachine makes one control-plane Machine and its AnvilMachine: the
// Cluster's control plane is initialized once its Node is there (no control-plane provider).
func newControlPlaneMachine(t testing.TB, r *rig, cluster *clusterv1.Cluster, name string, arch computev1alpha1.Architecture) {
	t.Helper()
	if err := capienv.Create(context.Background(), env.Client, capienv.ControlPlaneMachine(cluster, name, bootstrapSecret, machineSpec(r, arch))...); err != nil {
		t.Fatal(err)
	}
}

// newMachineDeployment makes an AnvilMachineTemplate and a MachineDeployment of replicas
// Machines from it in failure domain zone.
func newMachineDeployment(t testing.TB, cluster *clusterv1.Cluster, name string, spec infrav1.AnvilMachineSpec, zone string, replicas int32) *clusterv1.MachineDeployment {
	t.Helper()
	md, tmpl := capienv.MachineDeployment(cluster, name, bootstrapSecret, zone, spec, replicas)
	if err := capienv.Create(context.Background(), env.Client, tmpl, md); err != nil {
		t.Fatal(err)
	}
	return md
}

// standIns makes the workload cluster's Nodes for machines that cannot run a guest: the fake
// pools' machines run nothing, so this test code registers, in their place, a Node for every
// provisioned AnvilMachine of a namespace, labelled anvil.dev/stand-in so no one takes it for
// one a guest made. Its Ready condition is the test's to set (Unhealthy).
type standIns struct {
	t  testing.TB
	r  *rig
	ns string

	mu        sync.Mutex
	unhealthy map[string]bool // by providerID
}

const standInLabel = "anvil.dev/stand-in"

func startStandIns(t testing.TB, r *rig, ns string) *standIns {
	s := &standIns{t: t, r: r, ns: ns, unhealthy: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := s.sync(ctx); err != nil && ctx.Err() == nil {
				t.Logf("stand-in Nodes: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return s
}

// Unhealthy turns the Ready condition of the Node of providerID False (or back).
func (s *standIns) Unhealthy(providerID string, unhealthy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unhealthy[providerID] = unhealthy
}

func (s *standIns) sync(ctx context.Context) error {
	ams := &infrav1.AnvilMachineList{}
	if err := env.Client.List(ctx, ams, client.InNamespace(s.ns)); err != nil {
		return err
	}
	for _, am := range ams.Items {
		if am.Spec.ProviderID == "" || am.Status.Initialization.Provisioned == nil || !*am.Status.Initialization.Provisioned || am.DeletionTimestamp != nil {
			continue
		}
		m := &computev1alpha1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: am.Name}, m); err != nil {
			continue
		}
		if err := s.ensureNode(ctx, am.Namespace+"-"+am.Name, am.Spec.ProviderID, string(m.Status.Architecture)); err != nil {
			return err
		}
	}
	return nil
}

func (s *standIns) ensureNode(ctx context.Context, name, providerID, arch string) error {
	c := s.r.workloadClient
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if err := ignoreNotFound(err); err != errNotYet {
			return err
		}
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			standInLabel: "true", corev1.LabelArchStable: arch, corev1.LabelOSStable: "linux", corev1.LabelHostname: name}},
			Spec: corev1.NodeSpec{ProviderID: providerID}}
		if err := c.Create(ctx, node); err != nil {
			return err
		}
	}
	s.mu.Lock()
	ready := corev1.ConditionTrue
	if s.unhealthy[providerID] {
		ready = corev1.ConditionFalse
	}
	s.mu.Unlock()
	if c := nodeCondition(node, corev1.NodeReady); c != nil && c.Status == ready {
		return nil
	}
	now := metav1.Now()
	base := node.DeepCopy()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "StandIn", LastHeartbeatTime: now, LastTransitionTime: now}}
	for _, p := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: p, Status: corev1.ConditionFalse, Reason: "StandIn", LastHeartbeatTime: now, LastTransitionTime: now})
	}
	node.Status.NodeInfo.Architecture, node.Status.NodeInfo.OperatingSystem = arch, "linux"
	return c.Status().Patch(ctx, node, client.MergeFrom(base))
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// waitReplicas waits until md has exactly n Machines, each healthy, each on an anvil Machine
// of arch running on a pool of zone, and returns them.
func waitReplicas(t testing.TB, md *clusterv1.MachineDeployment, n int, arch computev1alpha1.Architecture, zone string) []clusterv1.Machine {
	t.Helper()
	ctx := context.Background()
	var machines []clusterv1.Machine
	start := time.Now()
	defer func() {
		t.Logf("%s: %d healthy Machines after %s", md.Name, n, time.Since(start).Round(100*time.Millisecond))
	}()
	capienv.Eventually(t, 3*time.Minute, fmt.Sprintf("MachineDeployment %s at %d healthy Machines", md.Name, n), func() error {
		var err error
		if machines, err = capienv.MachinesOf(ctx, env.Client, md); err != nil {
			return err
		}
		if len(machines) != n {
			return fmt.Errorf("%d Machines", len(machines))
		}
		for i := range machines {
			if err := capienv.Healthy(&machines[i]); err != nil {
				return err
			}
			if err := onPool(ctx, &machines[i], arch, zone); err != nil {
				return err
			}
		}
		return nil
	})
	return machines
}

// onPool says why a Machine's anvil Machine is not of arch on a pool of zone, or nil.
func onPool(ctx context.Context, m *clusterv1.Machine, arch computev1alpha1.Architecture, zone string) error {
	am := &infrav1.AnvilMachine{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, am); err != nil {
		return err
	}
	if m.Spec.ProviderID != am.Spec.ProviderID || am.Spec.ProviderID != "anvil://"+m.Namespace+"/"+am.Name {
		return fmt.Errorf("Machine %s providerID %q, AnvilMachine's %q", m.Name, m.Spec.ProviderID, am.Spec.ProviderID)
	}
	if am.Status.FailureDomain != zone {
		return fmt.Errorf("AnvilMachine %s in failure domain %q, want %q", am.Name, am.Status.FailureDomain, zone)
	}
	anvil := &computev1alpha1.Machine{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: am.Name}, anvil); err != nil {
		return err
	}
	if anvil.Status.Architecture != arch || anvil.Status.State != computev1alpha1.MachineStateRunning {
		return fmt.Errorf("anvil Machine %s is %s %s on %s", anvil.Name, anvil.Status.State, anvil.Status.Architecture, anvil.Status.Pool)
	}
	return nil
}
