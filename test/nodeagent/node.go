package nodeagent

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Facts are what the agent reports about the machine it runs on (gatherFacts).
type Facts struct {
	Arch, OS      string // GOARCH and GOOS: the Node's kubernetes.io labels and nodeInfo
	KernelVersion string
	OSImage       string
	BootID        string
	Addresses     []corev1.NodeAddress
	CPUs          int
	MemoryBytes   int64
}

// conditionReasons of the conditions the agent posts. Ready=True says the agent runs; the
// pressures are False because the agent runs nothing that could press.
var postedConditions = []struct {
	t               corev1.NodeConditionType
	status          corev1.ConditionStatus
	reason, message string
}{
	{corev1.NodeReady, corev1.ConditionTrue, "AgentReady", "anvil-node-agent is posting ready status"},
	{corev1.NodeMemoryPressure, corev1.ConditionFalse, "AgentHasSufficientMemory", "anvil-node-agent runs no Pods"},
	{corev1.NodeDiskPressure, corev1.ConditionFalse, "AgentHasNoDiskPressure", "anvil-node-agent runs no Pods"},
	{corev1.NodePIDPressure, corev1.ConditionFalse, "AgentHasSufficientPID", "anvil-node-agent runs no Pods"},
}

// NewNode is the Node the agent registers: its name, provider ID and labels (the agent's own
// after cfg's, so they cannot be overridden; Validate refuses that anyway).
func NewNode(cfg *Config, f Facts) *corev1.Node {
	labels := map[string]string{}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	labels[labelArch] = f.Arch
	labels[labelOS] = f.OS
	labels[labelHostname] = cfg.NodeName
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: cfg.ProviderID},
	}
}

// NodeStatus is the status the agent posts at now. A condition whose status observed (the
// Node as last read, nil before the first post) already has keeps its transition time.
func NodeStatus(f Facts, observed *corev1.Node, now time.Time) corev1.NodeStatus {
	t := metav1.NewTime(now.Truncate(time.Second))
	var conds []corev1.NodeCondition
	for _, pc := range postedConditions {
		c := corev1.NodeCondition{Type: pc.t, Status: pc.status, Reason: pc.reason, Message: pc.message,
			LastHeartbeatTime: t, LastTransitionTime: t}
		if old := condition(observed, pc.t); old != nil && old.Status == pc.status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		conds = append(conds, c)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(f.CPUs), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(f.MemoryBytes, resource.BinarySI),
		// No kubelet runs Pods here: none may be scheduled.
		corev1.ResourcePods: *resource.NewQuantity(0, resource.DecimalSI),
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Conditions:  conds,
		Addresses:   f.Addresses,
		NodeInfo: corev1.NodeSystemInfo{
			Architecture: f.Arch, OperatingSystem: f.OS, KernelVersion: f.KernelVersion,
			OSImage: f.OSImage, BootID: f.BootID,
		},
	}
}

// NeedsStatus reports whether the status must be posted now: the Node differs from what the
// agent posts (the node lifecycle controller marked it NotReady, someone edited it), or
// interval passed since the last post.
func NeedsStatus(observed *corev1.Node, lastPosted, now time.Time, interval time.Duration) bool {
	if now.Sub(lastPosted) >= interval {
		return true
	}
	for _, pc := range postedConditions {
		if c := condition(observed, pc.t); c == nil || c.Status != pc.status {
			return true
		}
	}
	return false
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	if n == nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// leaseNamespace holds one Lease per Node, named after it; renewing it is the node's
// heartbeat to the node lifecycle controller.
const leaseNamespace = "kube-node-lease"

// NewLease is node's Lease renewed at now, owned by its Node (so it goes with it), as the
// kubelet makes it.
func NewLease(node *corev1.Node, now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: leaseNamespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(node.Name),
			LeaseDurationSeconds: ptr.To(int32(leaseDurationSeconds)),
			RenewTime:            &metav1.MicroTime{Time: now},
		},
	}
}
