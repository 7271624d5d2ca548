package anvilmachine

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// Input is what the controller observed for one AnvilMachine that is not being deleted.
type Input struct {
	AnvilMachine *infrav1.AnvilMachine
	// Machine is the owner Cluster API Machine; nil until Cluster API sets the owner reference.
	Machine *clusterv1.Machine
	// ClusterInfrastructureProvisioned is the Cluster's status.initialization.infrastructureProvisioned.
	ClusterInfrastructureProvisioned bool
	// FailureDomainLabel is the AnvilCluster's spec.failureDomainLabel (empty: the default).
	FailureDomainLabel string
	// Namespace is where a new anvil Machine goes: the AnvilMachine's own namespace, or the
	// one the AnvilCluster's identity names in another anvil control plane.
	Namespace string
	// Bootstrap is the Machine's bootstrap data Secret; nil when the Machine names one that
	// does not exist (or names none).
	Bootstrap *corev1.Secret
	// Existing is the anvil Machine at MachineKey; nil if there is none.
	Existing *computev1alpha1.Machine
	// FirstBootSecret is the Secret at MachineKey (the first-boot Secret's name); nil if
	// there is none. One the provider did not make is never written.
	FirstBootSecret *corev1.Secret
	// Local is true when the anvil Machine lives in this control plane (no identityRef): its
	// first-boot Secret is then owned by the AnvilMachine.
	Local bool
	// PoolLabels are the labels of the MachinePool Existing runs on; nil if unknown.
	PoolLabels map[string]string
	// Hostname, MetaData and HardwareMetaData are what the AnvilMachine's data template
	// renders (internal/capi/datatemplate); empty without one. A new anvil Machine gets them
	// as its spec.hostname, spec.metaData (with the provider-id key always added) and
	// spec.hardwareMetaData, which the runtime placing it resolves into its first boot.
	Hostname         string
	MetaData         map[string]string
	HardwareMetaData []computev1alpha1.HardwareMetaData
	// LoadBalancer is the AnvilCluster's spec.controlPlaneLoadBalancer and status: a new
	// anvil Machine gets the metadata of its node-local proxy from it (see metaData); nil
	// without one.
	LoadBalancer *LoadBalancer
}

// LoadBalancer is what an AnvilCluster with a control-plane load balancer says of it.
type LoadBalancer struct {
	// Endpoint is spec.controlPlaneEndpoint and SegmentEndpoint the status's: either is
	// zero until the LoadBalancer has reported them.
	Endpoint, SegmentEndpoint clusterv1.APIEndpoint
}

// Plan is what to do for an AnvilMachine. Apply it in this order: Secret, Create or Image,
// then the AnvilMachine (ProviderID and BlockMove, then its status). A providerID is written
// only once its anvil Machine has been seen, so an AnvilMachine with a providerID and no anvil
// Machine has lost it, and it is never made again.
type Plan struct {
	// Secret is the first-boot Secret (named like the anvil Machine, in its namespace), to
	// create or bring to this data. Nil: leave Secrets alone (also when the bootstrap data
	// Secret already has that name, and the anvil Machine boots it in place).
	Secret *corev1.Secret
	// Create is the anvil Machine to create. Nil when it exists or must not be made.
	Create *computev1alpha1.Machine
	// Image is set on the existing anvil Machine, which reimages in place (what an in-place
	// update of the AnvilMachine's image asks). Empty: unchanged.
	Image string
	// ProviderID is written into the AnvilMachine's spec. Empty: unchanged.
	ProviderID string
	// BlockMove says whether the AnvilMachine carries the block-move annotation: while its
	// anvil Machine is being made, `clusterctl move` waits.
	BlockMove bool

	// Provisioned, Addresses and FailureDomain are the AnvilMachine's status.
	Provisioned   bool
	Addresses     []clusterv1.MachineAddress
	FailureDomain string
	// Ready is the AnvilMachine's Ready condition.
	Ready metav1.Condition
}

// MachineKey is the namespace and name of the AnvilMachine's anvil Machine: the one its
// providerID names once written, before that the AnvilMachine's name in namespace (see
// Input.Namespace). A providerID naming another namespace is refused: a tenant who writes
// one into an AnvilMachine must not reach, reimage or delete a Machine outside its own.
func MachineKey(am *infrav1.AnvilMachine, namespace string) (string, string, error) {
	if am.Spec.ProviderID == "" {
		return namespace, am.Name, nil
	}
	ns, name, err := ParseProviderID(am.Spec.ProviderID)
	if err != nil {
		return "", "", err
	}
	if ns != namespace {
		return "", "", fmt.Errorf("spec.providerID %s names a Machine in namespace %s, but this AnvilMachine's anvil Machines live in %s: the provider sets providerID, leave it empty", am.Spec.ProviderID, ns, namespace)
	}
	return ns, name, nil
}

// Decide plans the next step for an AnvilMachine that is not being deleted, following Cluster
// API's contract: wait for the owner Machine, the Cluster's infrastructure and the bootstrap
// data; then make one anvil Machine and report it.
func Decide(in Input) Plan {
	am := in.AnvilMachine
	p := Plan{Provisioned: am.Status.Initialization.Provisioned != nil && *am.Status.Initialization.Provisioned}
	wait := func(reason, msg string) Plan {
		p.Ready = condition(metav1.ConditionFalse, reason, msg)
		return p
	}
	switch {
	case in.Machine == nil:
		return wait(infrav1.ReasonWaitingForOwner, "waiting for Cluster API to set the owner Machine")
	case !in.ClusterInfrastructureProvisioned && in.Existing == nil:
		return wait(infrav1.ReasonWaitingForClusterInfrastructure, fmt.Sprintf("waiting for the infrastructure of Cluster %s to be provisioned", in.Machine.Spec.ClusterName))
	}

	if _, _, err := MachineKey(am, in.Namespace); err != nil {
		return wait(infrav1.ReasonForeignProviderID, err.Error())
	}
	clusterName := am.Labels[clusterv1.ClusterNameLabel]
	if in.Existing != nil && !ours(in.Existing, am.Name, clusterName) {
		return wait(infrav1.ReasonMachineNameTaken, fmt.Sprintf("anvil Machine %s/%s exists and was not made for this AnvilMachine; it is left alone: delete or rename it", in.Existing.Namespace, in.Existing.Name))
	}
	if in.Existing == nil && am.Spec.ProviderID != "" {
		ns, name, _ := ParseProviderID(am.Spec.ProviderID)
		return wait(infrav1.ReasonMachineGone, fmt.Sprintf("anvil Machine %s/%s is gone and is not made again: delete the Cluster API Machine (a MachineHealthCheck does) to replace it", ns, name))
	}

	fb, reason, msg := bootstrap(in)
	if in.Existing == nil {
		if reason != "" {
			return wait(reason, msg)
		}
		if lb := in.LoadBalancer; lb != nil && (!lb.Endpoint.IsValid() || !lb.SegmentEndpoint.IsValid()) {
			return wait(infrav1.ReasonWaitingForLoadBalancer, fmt.Sprintf(
				"waiting for the control-plane load balancer of Cluster %s to report its endpoints (AnvilCluster status.controlPlaneLoadBalancer): its machines boot with them", in.Machine.Spec.ClusterName))
		}
		inPlace := bootsInPlace(in, in.Namespace, am.Name)
		m, err := desiredMachine(in, clusterName, fb, inPlace)
		if err != nil {
			return wait(infrav1.ReasonFailureDomainConflict, err.Error())
		}
		if !inPlace && in.FirstBootSecret != nil && !secretOurs(in.FirstBootSecret, am, clusterName, in.Local) {
			return wait(infrav1.ReasonSecretNameTaken, fmt.Sprintf("Secret %s/%s exists and was not made for this AnvilMachine (labels %s and %s, and an owner reference to it); it is left alone and no anvil Machine is made: delete or rename it",
				m.Namespace, m.Name, infrav1.AnvilMachineLabel, clusterv1.ClusterNameLabel))
		}
		if !inPlace {
			p.Secret = firstBootSecret(in, m.Namespace, m.Name, clusterName, fb)
		}
		p.Create = m
		p.BlockMove = true
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonProvisioning, fmt.Sprintf("creating anvil Machine %s/%s", m.Namespace, m.Name))
		return p
	}

	m := in.Existing
	if reason == "" && (in.FirstBootSecret == nil || secretOurs(in.FirstBootSecret, am, clusterName, in.Local)) {
		// New bootstrap data reaches the machine at its next reimage; bad data is not
		// written, and the machine keeps the first-boot config it has. A Secret of the
		// name that is not the provider's is never written.
		p.Secret = firstBootSecret(in, m.Namespace, m.Name, clusterName, fb)
	}
	if am.Spec.ProviderID == "" {
		p.ProviderID = ProviderID(m.Namespace, m.Name)
	}
	if m.Spec.Image != am.Spec.Image {
		p.Image = am.Spec.Image
	}
	running := m.Status.State == computev1alpha1.MachineStateRunning && m.DeletionTimestamp == nil
	p.Provisioned = p.Provisioned || running
	p.BlockMove = !p.Provisioned
	p.Addresses = addresses(m.Status.Addresses)
	if v, ok := in.PoolLabels[failureDomainLabel(in.FailureDomainLabel)]; ok {
		p.FailureDomain = v
	}
	switch {
	case running:
		p.Ready = condition(metav1.ConditionTrue, infrav1.ReasonRunning, "")
	case p.Provisioned:
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonNotRunning, notRunning(m))
	case unmetImageRequirements(m):
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonImageRequirementsUnmet, explain(m))
	default:
		p.Ready = condition(metav1.ConditionFalse, infrav1.ReasonProvisioning, explain(m))
	}
	return p
}

// unmetImageRequirements says whether the scheduler holds m back because its image lacks a
// required annotation.
func unmetImageRequirements(m *computev1alpha1.Machine) bool {
	c := apimeta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == computev1alpha1.ReasonImageRequirementsUnmet
}

// bootsInPlace says whether the bootstrap data Secret is itself at the first-boot Secret's
// name (namespace/name, in this control plane): kubeadm's bootstrap provider names its Secret
// after its KubeadmConfig, which KubeadmControlPlane and MachineSets name like the Machine and
// its AnvilMachine. The anvil Machine then boots that Secret's value itself (the bootstrap
// data has passed bootstrap's checks); a copy would overwrite the bootstrap provider's Secret.
func bootsInPlace(in Input, namespace, name string) bool {
	return in.Local && in.Bootstrap != nil && in.Bootstrap.Namespace == namespace && in.Bootstrap.Name == name
}

// bootstrap reads the Machine's bootstrap data, or says (reason, message) why there is none
// to boot yet.
func bootstrap(in Input) (FirstBoot, string, string) {
	name := in.Machine.Spec.Bootstrap.DataSecretName
	switch {
	case name == nil || *name == "":
		return FirstBoot{}, infrav1.ReasonWaitingForBootstrapData, "waiting for the Machine's bootstrap data Secret"
	case in.Bootstrap == nil:
		return FirstBoot{}, infrav1.ReasonBootstrapDataNotFound, fmt.Sprintf("bootstrap data Secret %s/%s not found", in.Machine.Namespace, *name)
	}
	if err := CheckBootstrapOwner(in.Bootstrap, in.Machine.Spec.ClusterName); err != nil {
		return FirstBoot{}, infrav1.ReasonBootstrapDataNotOwned, err.Error()
	}
	fb, err := ReadBootstrap(in.Bootstrap)
	if err != nil {
		return FirstBoot{}, infrav1.ReasonBootstrapDataInvalid, err.Error()
	}
	return fb, "", ""
}

// DeletePlan is what to do for an AnvilMachine being deleted.
type DeletePlan struct {
	// DeleteMachine deletes the anvil Machine (its pool frees the server or VM).
	DeleteMachine bool
	// RemoveFinalizer lets the AnvilMachine go.
	RemoveFinalizer bool
	// Ready is the AnvilMachine's Ready condition while it waits; zero when it goes.
	Ready metav1.Condition
}

// DecideDelete plans the deletion of an AnvilMachine whose anvil Machine is existing (nil if
// none). An AnvilMachine deleted by `clusterctl move` keeps its anvil Machine: the moved copy
// goes on using it.
func DecideDelete(am *infrav1.AnvilMachine, existing *computev1alpha1.Machine) DeletePlan {
	if _, moved := am.Annotations[infrav1.AnnotationDeleteForMove]; moved {
		return DeletePlan{RemoveFinalizer: true}
	}
	if existing == nil || !ours(existing, am.Name, am.Labels[clusterv1.ClusterNameLabel]) {
		return DeletePlan{RemoveFinalizer: true}
	}
	if existing.DeletionTimestamp == nil {
		return DeletePlan{DeleteMachine: true, Ready: condition(metav1.ConditionFalse, infrav1.ReasonDeleting,
			fmt.Sprintf("deleting anvil Machine %s/%s", existing.Namespace, existing.Name))}
	}
	return DeletePlan{Ready: condition(metav1.ConditionFalse, infrav1.ReasonDeleting,
		fmt.Sprintf("waiting for anvil Machine %s/%s to be deleted: its pool frees the server or VM", existing.Namespace, existing.Name))}
}

// Ours says whether the provider made anvil Machine m for am: remediation and deletion act
// only on such a Machine.
func Ours(m *computev1alpha1.Machine, am *infrav1.AnvilMachine) bool {
	return ours(m, am.Name, am.Labels[clusterv1.ClusterNameLabel])
}

// ours says whether the provider made m for the AnvilMachine name of cluster clusterName.
func ours(m *computev1alpha1.Machine, name, clusterName string) bool {
	return m.Labels[infrav1.AnvilMachineLabel] == name && m.Labels[clusterv1.ClusterNameLabel] == clusterName
}

func failureDomainLabel(l string) string {
	if l == "" {
		return infrav1.DefaultFailureDomainLabel
	}
	return l
}

func labels(name, clusterName string) map[string]string {
	return map[string]string{infrav1.AnvilMachineLabel: name, clusterv1.ClusterNameLabel: clusterName}
}

func firstBootSecret(in Input, namespace, name, clusterName string, fb FirstBoot) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(name, clusterName)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{fb.Key(): fb.Data},
	}
	if in.Local {
		s.OwnerReferences = []metav1.OwnerReference{ownerRef(in.AnvilMachine)}
	}
	return s
}

// desiredMachine is the anvil Machine for the AnvilMachine: its template, placed in the
// Machine's failure domain, booting the bootstrap data (in the Secret of the same name: the
// provider's copy, or, inPlace, the bootstrap data Secret's value).
func desiredMachine(in Input, clusterName string, fb FirstBoot, inPlace bool) (*computev1alpha1.Machine, error) {
	am := in.AnvilMachine.DeepCopy()
	s := am.Spec
	selector := maps.Clone(s.MachinePoolSelector)
	if fd := in.Machine.Spec.FailureDomain; fd != "" {
		key := failureDomainLabel(in.FailureDomainLabel)
		if v, ok := selector[key]; ok && v != fd {
			return nil, fmt.Errorf("the Machine's failure domain %q and the template's machinePoolSelector %s=%s disagree: drop %s from the AnvilMachineTemplate's machinePoolSelector", fd, key, v, key)
		}
		if selector == nil {
			selector = map[string]string{}
		}
		selector[key] = fd
	}
	l := labels(am.Name, clusterName)
	if _, ok := in.Machine.Labels[clusterv1.MachineControlPlaneLabel]; ok {
		// The control-plane LoadBalancer's selector picks it.
		l[clusterv1.MachineControlPlaneLabel] = ""
	}
	m := &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: am.Name, Namespace: in.Namespace, Labels: l},
		Spec: computev1alpha1.MachineSpec{
			MachineClassRef:          s.MachineClassRef,
			Image:                    s.Image,
			RequiredImageAnnotations: maps.Clone(s.RequiredImageAnnotations),
			ImageUpdatePolicy:        computev1alpha1.ImageUpdatePolicyReimage,
			Architecture:             s.Architecture,
			Emulation:                s.Emulation,
			MachinePoolSelector:      selector,
			HostSelector:             s.HostSelector,
			Tolerations:              s.Tolerations,
			Power:                    computev1alpha1.PowerOn,
			Volumes:                  s.Volumes,
			NetworkInterfaces:        s.NetworkInterfaces,
			Hostname:                 in.Hostname,
			MetaData:                 metaData(in.MetaData, in.Namespace, am.Name, in.LoadBalancer),
			HardwareMetaData:         slices.Clone(in.HardwareMetaData),
		},
	}
	ref := &computev1alpha1.SecretKeySelector{Name: am.Name}
	if inPlace {
		ref.Key = BootstrapValueKey
	}
	if fb.Ignition {
		m.Spec.IgnitionRef = ref
	} else {
		m.Spec.UserDataRef = ref
	}
	return m, nil
}

// metaData is the template's metadata with the provider-id key, which the guest's node
// agent writes into its Node's spec.providerID, so Cluster API matches the two, and, with a
// control-plane load balancer, where the node-local proxy listens and where it forwards:
// the endpoint's own address on the node, the load balancer's at the segment's gateway.
func metaData(rendered map[string]string, namespace, name string, lb *LoadBalancer) map[string]string {
	md := maps.Clone(rendered)
	if md == nil {
		md = map[string]string{}
	}
	md[infrav1.MetaDataProviderID] = ProviderID(namespace, name)
	if lb != nil {
		md[infrav1.MetaDataControlPlaneEndpoint] = hostPort(lb.Endpoint)
		md[infrav1.MetaDataControlPlaneForward] = hostPort(lb.SegmentEndpoint)
	}
	return md
}

func hostPort(e clusterv1.APIEndpoint) string {
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
}

// addressTypes are the address types Cluster API accepts; anvil's free-form types outside
// them are not reported.
var addressTypes = []clusterv1.MachineAddressType{
	clusterv1.MachineHostName, clusterv1.MachineExternalIP, clusterv1.MachineInternalIP,
	clusterv1.MachineExternalDNS, clusterv1.MachineInternalDNS,
}

func addresses(in []computev1alpha1.MachineAddress) []clusterv1.MachineAddress {
	var out []clusterv1.MachineAddress
	for _, a := range in {
		if t := clusterv1.MachineAddressType(a.Type); slices.Contains(addressTypes, t) && a.Address != "" {
			out = append(out, clusterv1.MachineAddress{Type: t, Address: a.Address})
		}
	}
	return out
}

func notRunning(m *computev1alpha1.Machine) string {
	if m.DeletionTimestamp != nil {
		return fmt.Sprintf("anvil Machine %s/%s is being deleted", m.Namespace, m.Name)
	}
	return fmt.Sprintf("anvil Machine %s/%s is %s", m.Namespace, m.Name, state(m))
}

// explain says why the anvil Machine does not run yet, in its own words: first whether it
// has no pool (an architecture or selector no pool offers), then its Ready condition.
func explain(m *computev1alpha1.Machine) string {
	if m.DeletionTimestamp != nil {
		return notRunning(m)
	}
	if c := apimeta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionScheduled); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("anvil Machine %s/%s is not scheduled: %s: %s", m.Namespace, m.Name, c.Reason, c.Message)
	}
	if c := apimeta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
		return fmt.Sprintf("anvil Machine %s/%s: %s: %s", m.Namespace, m.Name, c.Reason, c.Message)
	}
	return fmt.Sprintf("anvil Machine %s/%s is %s", m.Namespace, m.Name, state(m))
}

func state(m *computev1alpha1.Machine) computev1alpha1.MachineState {
	if m.Status.State == "" {
		return computev1alpha1.MachineStatePending
	}
	return m.Status.State
}

func condition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: infrav1.ConditionReady, Status: status, Reason: reason, Message: msg}
}
