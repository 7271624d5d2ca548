package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// RemediationType is one way anvil tries to bring an unhealthy machine back.
// +kubebuilder:validation:Enum=Reboot;PowerCycle
type RemediationType string

const (
	// RemediationInvalid is the zero value, never valid.
	RemediationInvalid RemediationType = ""
	// RemediationReboot resets the running machine through its runtime (a VM's reset, a
	// server's BMC reset): the compute.anvil.dev/reboot annotation.
	RemediationReboot RemediationType = "Reboot"
	// RemediationPowerCycle powers the machine off, waits until its runtime reports it off,
	// and powers it on again: a VM gets a new QEMU process, a server a BMC power cycle.
	RemediationPowerCycle RemediationType = "PowerCycle"
)

// RemediationStrategy is one way to try, how often, and how long to wait for the machine
// to be healthy again after each try.
type RemediationStrategy struct {
	// Type is Reboot or PowerCycle.
	// +required
	Type RemediationType `json:"type"`

	// Retries is how many times this strategy is tried before the next one.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Retries int32 `json:"retries,omitempty"`

	// Timeout is how long each try waits for the MachineHealthCheck to find the machine
	// healthy again (it then deletes this remediation) before the next try. For PowerCycle
	// it counts from power-on.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('2h')",message="timeout must be between 10s and 2h"
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// AnvilRemediationSpec is how anvil tries to bring an unhealthy machine back before Cluster
// API replaces it.
type AnvilRemediationSpec struct {
	// Strategies are tried in order. When the last try of the last one times out, the
	// remediation gives up: the Machine's OwnerRemediated condition turns False and Cluster
	// API replaces the machine.
	// +optional
	// +kubebuilder:default={{type: Reboot, retries: 1, timeout: "5m"}, {type: PowerCycle, retries: 1, timeout: "5m"}}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	Strategies []RemediationStrategy `json:"strategies,omitempty"`
}

// RemediationPhase is where a remediation stands.
// +kubebuilder:validation:Enum=Running;WaitingForPowerOff;Failed
type RemediationPhase string

const (
	// RemediationPhaseInvalid is the zero value: the remediation has not started.
	RemediationPhaseInvalid RemediationPhase = ""
	// RemediationPhaseRunning: a try was made and waits for the machine to be healthy.
	RemediationPhaseRunning RemediationPhase = "Running"
	// RemediationPhaseWaitingForPowerOff: a power cycle turned the machine off and waits
	// for its runtime to report it off before turning it on.
	RemediationPhaseWaitingForPowerOff RemediationPhase = "WaitingForPowerOff"
	// RemediationPhaseFailed: every try timed out; Cluster API replaces the machine.
	RemediationPhaseFailed RemediationPhase = "Failed"
)

// AnvilRemediationStatus records the tries made, so a restarted provider goes on from
// where it was, never repeating or skipping one.
type AnvilRemediationStatus struct {
	// Phase is Running, WaitingForPowerOff or Failed; empty before the first try.
	// +optional
	Phase RemediationPhase `json:"phase,omitempty"`

	// Strategy is the index in spec.strategies of the current try's strategy.
	// +optional
	Strategy int32 `json:"strategy,omitempty"`

	// Try is the current try of that strategy, from 1.
	// +optional
	Try int32 `json:"try,omitempty"`

	// Tries counts every try made.
	// +optional
	Tries int32 `json:"tries,omitempty"`

	// LastTriedAt is when the current try started (for PowerCycle, when the machine was
	// powered on again).
	// +optional
	LastTriedAt *metav1.Time `json:"lastTriedAt,omitempty"`

	// Conditions: Ready (True while the machine is being remediated with hope; False once
	// the remediation gave up), Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AnvilRemediation is a MachineHealthCheck's request to remediate one Machine (it has the
// Machine's name): anvil reboots or power-cycles its anvil Machine, and gives up so that
// Cluster API replaces it if the machine does not come back healthy.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:path=anvilremediations,shortName=arem,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-anvil"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Tries",type=integer,JSONPath=`.status.tries`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AnvilRemediation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	// +kubebuilder:default={}
	Spec   AnvilRemediationSpec   `json:"spec,omitempty"`
	Status AnvilRemediationStatus `json:"status,omitempty"`
}

// AnvilRemediationList is a list of AnvilRemediations.
// +kubebuilder:object:root=true
type AnvilRemediationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnvilRemediation `json:"items"`
}

// AnvilRemediationTemplateResource is what each AnvilRemediation made from the template gets.
type AnvilRemediationTemplateResource struct {
	// Metadata is copied into each AnvilRemediation.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +optional
	// +kubebuilder:default={}
	Spec AnvilRemediationSpec `json:"spec,omitempty"`
}

// AnvilRemediationTemplateSpec holds the template a MachineHealthCheck copies.
type AnvilRemediationTemplateSpec struct {
	// +required
	Template AnvilRemediationTemplateResource `json:"template"`
}

// AnvilRemediationTemplate is named by a MachineHealthCheck's spec.remediation.templateRef:
// each unhealthy Machine gets an AnvilRemediation made from it.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=anvilremediationtemplates,shortName=aremt,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/provider=infrastructure-anvil"
type AnvilRemediationTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AnvilRemediationTemplateSpec `json:"spec"`
}

// AnvilRemediationTemplateList is a list of AnvilRemediationTemplates.
// +kubebuilder:object:root=true
type AnvilRemediationTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AnvilRemediationTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AnvilRemediation{}, &AnvilRemediationList{}, &AnvilRemediationTemplate{}, &AnvilRemediationTemplateList{})
}
