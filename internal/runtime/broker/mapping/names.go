package mapping

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Labels and annotations the broker puts on the downstream objects it makes.
const (
	// LabelPool names the upstream pool (the broker) that owns the object: two brokers may
	// share a downstream namespace.
	LabelPool = "broker.anvil.dev/pool"
	// LabelUpstreamUID is the upstream Machine's uid (mri.LabelMachineUID).
	LabelUpstreamUID = "broker.anvil.dev/upstream-uid"
	// AnnotationUpstream is the upstream Machine as <namespace>/<name>, for people.
	AnnotationUpstream = "broker.anvil.dev/upstream"
	// AnnotationRecord holds the Record (JSON), written only by the broker.
	AnnotationRecord = "broker.anvil.dev/record"
)

// Labels the upstream poollet puts on runtime machines (internal/poollet's
// LabelMachineNamespace and LabelMachineName), read here only for AnnotationUpstream.
const (
	upstreamNamespaceLabel = "anvil.dev/machine-namespace"
	upstreamNameLabel      = "anvil.dev/machine-name"
)

// Name is the downstream Machine's (and first-boot Secret's) name for an upstream
// machine: its uid label. A uid is unique and never reused, so a retried or restarted
// create finds the object by name. A uid that is no object name is INVALID.
func Name(labels map[string]string) (string, error) {
	uid := labels[mri.LabelMachineUID]
	if uid == "" {
		return "", invalidf("metadata.labels: %s is not set: the broker names the downstream Machine after it", mri.LabelMachineUID)
	}
	if errs := validation.IsDNS1123Subdomain(uid); len(errs) > 0 {
		return "", invalidf("metadata.labels[%s] %q cannot name a downstream Machine: %s", mri.LabelMachineUID, uid, errs[0])
	}
	return uid, nil
}

// ObjectLabels are the labels of every downstream object the broker of pool makes for
// the upstream machine of uid.
func ObjectLabels(pool, uid string) map[string]string {
	return map[string]string{LabelPool: pool, LabelUpstreamUID: uid}
}

// upstreamOf is AnnotationUpstream's value, "" when the caller did not label the
// machine with its Machine's namespace and name.
func upstreamOf(m *mriv1alpha1.Machine) string {
	l := m.GetMetadata().GetLabels()
	ns, name := l[upstreamNamespaceLabel], l[upstreamNameLabel]
	if ns == "" || name == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s", ns, name)
}
