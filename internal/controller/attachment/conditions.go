package attachment

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/index"
)

// Reasons of VolumesReady and NetworkInterfacesReady, worst first.
const (
	ReasonNotFound  = "NotFound"
	ReasonInUse     = "InUseByAnotherMachine"
	ReasonClaiming  = "Claiming"
	ReasonAttaching = "Attaching"
	ReasonAttached  = "Attached"
)

// device is one volume or NIC of a Machine's spec.
type device struct {
	// name in the Machine's spec.
	name string
	// ref is the referenced object's name, "" for inline and ephemeral devices.
	ref string
}

// referenced is what is known of a referenced object: whether it exists and who holds it.
type referenced struct {
	exists bool
	holder *computev1alpha1.ClaimReference
}

// readiness computes one condition for a Machine's devices of one kind ("Volume" or
// "NetworkInterface"), given the referenced objects and the reported attach states. The
// message names every device that holds readiness up, so a user knows what to fix.
func readiness(condType, kind string, m *computev1alpha1.Machine, devices []device,
	refs map[string]referenced, attach []computev1alpha1.AttachmentStatus) metav1.Condition {
	attached := map[string]bool{}
	for _, a := range attach {
		attached[a.Name] = a.State == computev1alpha1.AttachStateAttached
	}
	var notFound, inUse, claiming, attaching []string
	for _, d := range devices {
		if d.ref != "" {
			r := refs[d.ref]
			switch {
			case !r.exists:
				notFound = append(notFound, fmt.Sprintf("%s %s does not exist", kind, d.ref))
				continue
			case r.holder == nil:
				claiming = append(claiming, d.ref)
				continue
			case r.holder.UID != string(m.UID):
				inUse = append(inUse, fmt.Sprintf("%s %s is held by Machine %s", kind, d.ref, r.holder.Name))
				continue
			}
		}
		if !attached[d.name] {
			attaching = append(attaching, d.name)
		}
	}
	c := metav1.Condition{Type: condType, Status: metav1.ConditionFalse, ObservedGeneration: m.Generation}
	switch {
	case len(notFound) > 0:
		c.Reason, c.Message = ReasonNotFound, strings.Join(notFound, "; ")
	case len(inUse) > 0:
		c.Reason, c.Message = ReasonInUse, strings.Join(inUse, "; ")+": a "+strings.ToLower(kind)+" is attached to one Machine at a time"
	case len(claiming) > 0:
		c.Reason, c.Message = ReasonClaiming, "waiting to claim "+strings.Join(claiming, ", ")
	case len(attaching) > 0:
		c.Reason, c.Message = ReasonAttaching, "waiting for the pool to attach "+strings.Join(attaching, ", ")
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAttached, "all attached"
	}
	return c
}

// volumeDevices lists m's volumes; an ephemeral one refers to the Volume made for it.
func volumeDevices(m *computev1alpha1.Machine) []device {
	out := make([]device, 0, len(m.Spec.Volumes))
	for _, v := range m.Spec.Volumes {
		d := device{name: v.Name}
		switch {
		case v.VolumeRef != nil:
			d.ref = v.VolumeRef.Name
		case v.Ephemeral != nil:
			d.ref = index.EphemeralName(m.Name, v.Name)
		}
		out = append(out, d)
	}
	return out
}

func nicDevices(m *computev1alpha1.Machine) []device {
	out := make([]device, 0, len(m.Spec.NetworkInterfaces))
	for _, n := range m.Spec.NetworkInterfaces {
		d := device{name: n.Name}
		switch {
		case n.NetworkInterfaceRef != nil:
			d.ref = n.NetworkInterfaceRef.Name
		case n.Ephemeral != nil:
			d.ref = index.EphemeralName(m.Name, n.Name)
		}
		out = append(out, d)
	}
	return out
}
