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

	// AnvilClusterLabel, on a LoadBalancer, names the AnvilCluster it was made for (its
	// spec.controlPlaneLoadBalancer).
	AnvilClusterLabel = "infrastructure.cluster.x-k8s.io/anvil-cluster"

	// AnnotationBlockMove (clusterctl's name) holds `clusterctl move` back while set on an
	// object to move: the provider sets it on an AnvilMachine whose anvil Machine is still
	// being provisioned.
	AnnotationBlockMove = "clusterctl.cluster.x-k8s.io/block-move"
	// AnnotationDeleteForMove (clusterctl's name) is set by `clusterctl move` on the source
	// objects it deletes after copying them: the anvil Machine then stays, since the moved
	// AnvilMachine goes on using it.
	AnnotationDeleteForMove = "clusterctl.cluster.x-k8s.io/delete-for-move"
	// LabelMove (clusterctl's name) makes `clusterctl move` take an object that neither
	// belongs to a Cluster by owner references nor is named after it: the provider sets it on
	// an AnvilCluster's identityRef Secret, which the new management cluster needs.
	LabelMove = "clusterctl.cluster.x-k8s.io/move"
	// LabelBootstrapData marks a bootstrap data Secret written without a bootstrap provider
	// (by hand, for a Machine's bootstrap.dataSecretName) as first-boot data of the cluster
	// its value names. A Secret with neither this label nor a bootstrap provider's owner
	// reference is not booted.
	LabelBootstrapData = "infrastructure.cluster.x-k8s.io/anvil-bootstrap-data"

	// FinalizerAnvilMachine holds an AnvilMachine until its anvil Machine is deleted (or, for
	// a move, left to the moved copy).
	FinalizerAnvilMachine = "infrastructure.cluster.x-k8s.io/anvil-machine"
	// FinalizerAnvilRemediation holds an AnvilRemediation deleted in the middle of a power
	// cycle until the machine is powered on again.
	FinalizerAnvilRemediation = "infrastructure.cluster.x-k8s.io/anvil-remediation"
)

// Condition types of this group's kinds. Every condition carries a Reason; Cluster API mirrors
// Ready into the Cluster's and Machine's InfrastructureReady.
const (
	// ConditionReady is the summary for its whole life: provisioning, running, deleting.
	ConditionReady = "Ready"
	// ConditionPaused is True while the Cluster or the object is paused (Cluster
	// spec.paused, or the cluster.x-k8s.io/paused annotation), for `clusterctl move`.
	ConditionPaused = "Paused"
	// ConditionControlPlaneEndpointReachable is on a control-plane AnvilMachine whose
	// machine runs: whether the cluster's control-plane endpoint accepts a TCP connection
	// from the management cluster, where Cluster API reaches the API server through it.
	// Asked until the control plane is initialized; Cluster API watches it after that.
	ConditionControlPlaneEndpointReachable = "ControlPlaneEndpointReachable"
)

// Reasons of an AnvilMachine's ControlPlaneEndpointReachable condition.
const (
	// ReasonEndpointAccepts: the endpoint accepted a TCP connection (True).
	ReasonEndpointAccepts = "EndpointAccepts"
	// ReasonWaitingForAPIServer: the endpoint accepts no connection yet, and the machine
	// started less than the provider's grace ago: its API server may still be starting
	// (Unknown).
	ReasonWaitingForAPIServer = "WaitingForAPIServer"
	// ReasonEndpointUnreachable: the endpoint has accepted no connection for longer than the
	// grace after the machine started (False): an address or port nothing listens at, or
	// that the management cluster cannot reach; Cluster API will wait for it forever.
	ReasonEndpointUnreachable = "EndpointUnreachable"
	// ReasonControlPlaneInitialized: Cluster API reached the API server through the
	// endpoint and initialized the control plane (True); the provider asks no more.
	ReasonControlPlaneInitialized = "ControlPlaneInitialized"
)

// Reasons of an AnvilMachine's Ready condition, in the order the provider checks them.
const (
	// ReasonWaitingForOwner: Cluster API has not yet set the owner Machine.
	ReasonWaitingForOwner = "WaitingForOwner"
	// ReasonWaitingForClusterInfrastructure: the Cluster's infrastructure is not provisioned yet.
	ReasonWaitingForClusterInfrastructure = "WaitingForClusterInfrastructure"
	// ReasonWaitingForBootstrapData: the Machine has no bootstrap data Secret yet.
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	// ReasonBootstrapDataNotFound: the Machine names a bootstrap data Secret that does not exist.
	ReasonBootstrapDataNotFound = "BootstrapDataNotFound"
	// ReasonBootstrapDataInvalid: the bootstrap data Secret has no value, or a format anvil
	// cannot boot; the message says which.
	ReasonBootstrapDataInvalid = "BootstrapDataInvalid"
	// ReasonImageRequirementsUnmet: the anvil Machine is not scheduled because its image
	// lacks an annotation of requiredImageAnnotations (an image without Kubernetes, or of
	// another version); the message names the image and what it lacks.
	ReasonImageRequirementsUnmet = "ImageRequirementsUnmet"
	// ReasonFailureDomainConflict: the Machine's failure domain and the template's
	// machinePoolSelector ask for different values of the failure domain label.
	ReasonFailureDomainConflict = "FailureDomainConflict"
	// ReasonForeignProviderID: spec.providerID names a Machine outside the namespace this
	// AnvilMachine's anvil Machines live in; nothing there is read or touched.
	ReasonForeignProviderID = "ForeignProviderID"
	// ReasonDataTemplateNotFound: spec.dataTemplateRef names no AnvilDataTemplate.
	ReasonDataTemplateNotFound = "DataTemplateNotFound"
	// ReasonDataTemplateInvalid: the data template cannot be rendered for this machine (an
	// index past its address list, a hostname that is not one); the message says what to fix.
	ReasonDataTemplateInvalid = "DataTemplateInvalid"
	// ReasonMachineNameTaken: an anvil Machine of the AnvilMachine's name exists that the
	// provider did not make for it; it is left alone.
	ReasonMachineNameTaken = "MachineNameTaken"
	// ReasonSecretNameTaken: a Secret of the anvil Machine's name exists that the provider
	// did not make for this AnvilMachine (its labels, or its owner reference, say otherwise);
	// it is left alone and no anvil Machine is made.
	ReasonSecretNameTaken = "SecretNameTaken"
	// ReasonBootstrapDataNotOwned: the bootstrap data Secret the Machine names was not written
	// by a bootstrap provider for the Machine's cluster (no owner reference to a
	// bootstrap.cluster.x-k8s.io kind, or no cluster-name label of the cluster); it is not booted.
	ReasonBootstrapDataNotOwned = "BootstrapDataNotOwned"
	// ReasonProvisioning: the anvil Machine is being created or is not running yet; the
	// message carries the anvil Machine's own explanation.
	ReasonProvisioning = "Provisioning"
	// ReasonRunning: the anvil Machine runs.
	ReasonRunning = "Running"
	// ReasonNotRunning: the anvil Machine was running and is now shut down or stopping.
	ReasonNotRunning = "NotRunning"
	// ReasonMachineGone: the anvil Machine this AnvilMachine made is gone; it is not made
	// again (a MachineHealthCheck replaces the Cluster API Machine).
	ReasonMachineGone = "MachineGone"
	// ReasonDeleting: the anvil Machine is being deleted with the AnvilMachine.
	ReasonDeleting = "Deleting"
)

// Reasons of an AnvilCluster's Ready condition.
const (
	// ReasonIdentityUnusable: spec.identityRef's Secret is missing, holds no usable
	// kubeconfig, or the anvil control plane it names refuses it; the message says which.
	ReasonIdentityUnusable = "IdentityUnusable"
	// ReasonProvisioned: machines can be made and the control plane endpoint is known.
	ReasonProvisioned = "Provisioned"
	// ReasonWaitingForControlPlaneEndpoint: machines can be made (Ready is True), and the
	// endpoint will be the first control-plane machine's address.
	ReasonWaitingForControlPlaneEndpoint = "WaitingForControlPlaneEndpoint"
	// ReasonWaitingForLoadBalancer: spec.controlPlaneLoadBalancer's LoadBalancer is made and
	// has no endpoint yet (Ready is False: Cluster API's control plane waits for the
	// endpoint); the message carries the LoadBalancer's own reason. On an AnvilMachine: its
	// anvil Machine waits for the AnvilCluster to report the load balancer's endpoints.
	ReasonWaitingForLoadBalancer = "WaitingForLoadBalancer"
	// ReasonLoadBalancerNameTaken: a LoadBalancer of the AnvilCluster's name exists that the
	// provider did not make for this cluster; it is left alone.
	ReasonLoadBalancerNameTaken = "LoadBalancerNameTaken"
)

// First-boot metadata keys the provider gives every anvil Machine of a cluster with a
// control-plane load balancer: a node-local proxy (the cluster template's, see
// docs/loadbalancer.md) listens at the first and forwards to the second, so the nodes reach
// the control-plane endpoint at the address the host does. cloud-init templates read them
// as ds.meta_data.control_plane_endpoint and ds.meta_data.control_plane_forward.
const (
	MetaDataControlPlaneEndpoint = "control-plane-endpoint"
	MetaDataControlPlaneForward  = "control-plane-forward"
)

// Reasons of the Paused condition.
const (
	ReasonPaused    = "Paused"
	ReasonNotPaused = "NotPaused"
)
