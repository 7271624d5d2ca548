package v1alpha1

// Names the provider and Cluster API agree on.
const (
	// ContractLabel is the label on each CRD of this group that maps Cluster API's contract
	// version to this group's version (set by the kubebuilder:metadata markers on the kinds).
	ContractLabel = "cluster.x-k8s.io/v1beta2"

	// ProviderIDScheme starts every providerID anvil writes: anvil://<namespace>/<machine>,
	// the namespace and name of the anvil Machine (in the cluster identityRef names, if set).
	ProviderIDScheme = "anvil://"

	// AnvilMachineLabel, on an anvil Machine, names the AnvilMachine it was made for. The
	// anvil Machine has no owner reference to Cluster API objects, so it stays usable (and is
	// not garbage collected) without them.
	AnvilMachineLabel = "infrastructure.cluster.x-k8s.io/anvil-machine"
)

// Condition types of this group's kinds. Every condition carries a Reason; Cluster API mirrors
// Ready into the Cluster's and Machine's InfrastructureReady.
const (
	// ConditionReady is the summary for its whole life: provisioning, running, deleting.
	ConditionReady = "Ready"
	// ConditionPaused is True while the Cluster or the object is paused (Cluster
	// spec.paused, or the cluster.x-k8s.io/paused annotation), for `clusterctl move`.
	ConditionPaused = "Paused"
)
