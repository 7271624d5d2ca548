package hostplan

import (
	"encoding/json"
	"fmt"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// The deployment record (metalv1alpha1.AnnotationDeployment) is what the Host controller
// knows of a server's disks without asking the provisioner or reading status, both of
// which can be lost (a provisioner database deleted, a cluster restored from a backup
// without status). It is written before a deployment can start, so a server that may run a
// consumer's image is never deployed again for that consumer but adopted; it is marked
// released before the deployment is torn down, so a torn-down deployment is never adopted;
// and it is removed only once the server is wiped (or, where the site does not wipe,
// deprovisioned), so a released server is never handed to anyone unwiped.
//
// Adopting on the record means adopting a deployment that was started, not one known to
// have finished: if the provisioner lost its records between the start and the end, the
// server is taken as running the image. The other way, deploying again, would rewrite a
// consumer's server that may be running; a server adopted wrongly is reimaged by its
// consumer.

// Record is the value of a Host's deployment record.
type Record struct {
	// Consumer is the uid of the consumer the deployment was started for ("" for a Host
	// provisioned by hand, without a consumer).
	Consumer string `json:"consumer"`
	// Image is what was deployed (the Host's spec.image when the deployment started).
	Image *metalv1alpha1.HostImage `json:"image,omitempty"`
	// Rebuild is the rebuild token the deployment carried out (metal.anvil.dev/rebuild).
	Rebuild string `json:"rebuild,omitempty"`
	// Reboot is the last reboot token carried out on the deployment.
	Reboot string `json:"reboot,omitempty"`
	// Released: the deployment's tear-down was asked. The disks may still hold what the
	// consumer left; the deployment is never adopted.
	Released bool `json:"released,omitempty"`
}

// RecordOf reads the Host's deployment record: nil when it has none. An unreadable
// record (only a hand edit makes one) is an error; Decide takes it as a released
// deployment of an unknown consumer, never adopted and wiped before reuse.
func RecordOf(h *metalv1alpha1.Host) (*Record, error) {
	raw, ok := h.Annotations[metalv1alpha1.AnnotationDeployment]
	if !ok {
		return nil, nil
	}
	r := &Record{}
	if err := json.Unmarshal([]byte(raw), r); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", metalv1alpha1.AnnotationDeployment, err)
	}
	return r, nil
}

// Encode is the annotation's value for r.
func (r *Record) Encode() string {
	b, _ := json.Marshal(r) // strings, a bool and a HostImage of strings: it always encodes
	return string(b)
}

// recordOf is the record Decide works with.
func recordOf(h *metalv1alpha1.Host) *Record {
	r, err := RecordOf(h)
	if err != nil {
		return &Record{Consumer: "<unreadable record>", Released: true}
	}
	return r
}

// consumerUID is the uid of the Host's consumer, "" for none.
func consumerUID(h *metalv1alpha1.Host) string {
	if h.Spec.ConsumerRef == nil {
		return ""
	}
	return h.Spec.ConsumerRef.UID
}

// ours: r records a deployment started for the Host's consumer and not released since.
func (r *Record) ours(h *metalv1alpha1.Host) bool {
	return r != nil && !r.Released && r.Consumer == consumerUID(h)
}

// adoptable is the image the server runs for the Host's consumer, by the record, when the
// consumer still wants a server: what a server the provisioner forgot is adopted with.
func adoptable(in Input) *metalv1alpha1.HostImage {
	if in.record.ours(in.Host) && in.Host.Spec.Image != nil && in.record.Image != nil {
		return in.record.Image
	}
	return nil
}

// leftBehind: the record says the disks may hold a deployment that the Host's next one
// must not see: another consumer's, one released, or one whose consumer wants no server
// any more.
func leftBehind(in Input) bool {
	return in.record != nil && !(in.record.ours(in.Host) && in.Host.Spec.Image != nil)
}

// deploymentRecord is the record written when the Host's spec.image starts deploying:
// for its consumer, with the rebuild token the deployment carries out and the reboot
// token carried out already.
func deploymentRecord(in Input) *Record {
	h := in.Host
	return &Record{Consumer: consumerUID(h), Image: h.Spec.Image.DeepCopy(), Rebuild: h.Annotations[metalv1alpha1.AnnotationRebuild],
		Reboot: RebootDone(h)}
}

// releasedRecord is the record written before a deployment is torn down; nil when it
// says so already.
func releasedRecord(in Input) *Record {
	r := in.record
	if r == nil {
		return &Record{Consumer: consumerUID(in.Host), Image: HostImageOf(in.Node.Image), Released: true}
	}
	if r.Released {
		return nil
	}
	out := *r
	out.Released = true
	return &out
}

// backfill is the record of the deployment the provisioner runs, with spec.image, for the
// Host's consumer, when the record does not say so: none (provisioned by an anvil before
// records), or one of another image (a rebuild asked and then asked back before it
// started). nil when the record is right.
func backfill(in Input) *Record {
	h, r := in.Host, in.record
	switch {
	case r == nil:
		return &Record{Consumer: consumerUID(h), Image: h.Spec.Image.DeepCopy(), Rebuild: h.Status.RebuildToken, Reboot: h.Status.RebootToken}
	case r.ours(h) && !r.Image.Same(h.Spec.Image):
		out := *r
		out.Image = h.Spec.Image.DeepCopy()
		return &out
	}
	return nil
}

// rebooted is the record once the Host's reboot token is carried out on the consumer's
// deployment.
func rebooted(in Input) *Record {
	r := backfill(in)
	if r == nil {
		c := *in.record
		r = &c
	}
	r.Reboot = in.Host.Annotations[metalv1alpha1.AnnotationReboot]
	return r
}

// RebootDone is the last reboot token carried out: the status's, or, when the status has
// none (lost, or restored without it), the record's for the Host's consumer.
func RebootDone(h *metalv1alpha1.Host) string {
	if h.Status.RebootToken != "" {
		return h.Status.RebootToken
	}
	if r := recordOf(h); r.ours(h) {
		return r.Reboot
	}
	return ""
}

// RebootRequested: the Host carries a reboot token not carried out yet. No token asks for
// nothing (the metal runtime removes it when it claims a Host).
func RebootRequested(h *metalv1alpha1.Host) bool {
	token := h.Annotations[metalv1alpha1.AnnotationReboot]
	if r := recordOf(h); r.ours(h) && r.Reboot == token {
		return false
	}
	return token != "" && token != h.Status.RebootToken
}
