package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Labels and annotations the broker puts on the downstream objects it makes.
const (
	// LabelPool names the upstream pool (the broker) that owns the object: two brokers may
	// share a downstream namespace. The admission policy anvil-broker-scope lets a broker
	// write only what carries its own pool here.
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
// machine, and the value of its LabelUpstreamUID: its uid label. A uid is unique and never
// reused, so a retried or restarted create finds the object by name. A uid that cannot be
// a name and a label value (a Kubernetes UID always can; the conformance suite's test
// names cannot) is named by its hash instead, as deterministic and as unique.
func Name(labels map[string]string) (string, error) {
	uid := labels[mri.LabelMachineUID]
	if uid == "" {
		return "", invalidf("metadata.labels: %s is not set: the broker names the downstream Machine after it", mri.LabelMachineUID)
	}
	if len(validation.IsDNS1123Label(uid)) == 0 && !strings.HasPrefix(uid, hashedPrefix) {
		return uid, nil
	}
	sum := sha256.Sum256([]byte(uid))
	return hashedPrefix + hex.EncodeToString(sum[:20]), nil
}

// hashedPrefix starts the name of a uid that is no name; a uid starting so is hashed too,
// so that no uid is named like another's hash.
const hashedPrefix = "uid-"

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
