package metal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Annotations and labels the runtime writes.
const (
	// AnnotationMachine on a Host holds the record of the machine claiming it (JSON).
	AnnotationMachine = "metal.anvil.dev/machine"
	// AnnotationReboot on a Host asks the Host controller to reset the server once per
	// token; the Host's status.rebootToken says which it carried out last.
	AnnotationReboot = metalv1alpha1.AnnotationReboot
	// LabelConfigDrive marks the config-drive Secrets the runtime owns.
	LabelConfigDrive = "metal.anvil.dev/config-drive"
	// AnnotationMachineID on a config-drive Secret names its machine.
	AnnotationMachineID = "metal.anvil.dev/machine-id"
	// AnnotationMachineUID on a tenant's HardwareData names the Machine it was written
	// for, so a Machine of the same name never deletes another's copy.
	AnnotationMachineUID = "metal.anvil.dev/machine-uid"
)

// Labels the poollet puts on runtime machines (internal/poollet LabelMachineNamespace and
// LabelMachineName): the Machine's namespace decides which Hosts its HostPolicies allow.
const (
	LabelMachineNamespace = "anvil.dev/machine-namespace"
	LabelMachineName      = "anvil.dev/machine-name"
)

// record is what the MRI reports of a machine beyond the Host's status, kept on the
// Host it claims so that the API server is the runtime's only state.
type record struct {
	ID          string            `json:"id"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Generation  int64             `json:"generation"`
	CreatedAt   int64             `json:"createdAt"`
	// DeletedAt is set once DeleteMachine was called.
	DeletedAt int64 `json:"deletedAt,omitempty"`
	// ConfigDrive is the Secret holding the machine's config drive (first-boot data), the
	// one the Host was last deployed with or is being deployed with; empty in records
	// written before it was kept, whose Secret is the machine's first (configDriveName).
	ConfigDrive string `json:"configDrive,omitempty"`
	// Spec is the machine's spec as protobuf JSON without the first-boot data: that is in
	// the config-drive Secret, and Hosts are readable by more people than Secrets.
	Spec json.RawMessage `json:"spec"`
}

// hash is the hex digest naming everything of one machine uid (uids may hold any
// character, names may not).
func hash(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:10])
}

// machineID is the id of the machine of a uid: the same after any restart, and never
// another machine's, as uids are never reused.
func machineID(pool, uid string) string { return pool + "-" + hash(uid) }

// configDriveName is the Secret holding a machine's config drive, one per machine, so
// that claiming a Host never overwrites what another machine's claim points at.
func configDriveName(uid string) string { return "config-drive-" + hash(uid) }

// reimageDriveName is the Secret of the config drive a reimage to generation gen gives
// new data: a Secret of its own, so the Host keeps the old one until the update that names
// the new one. The name holds the generation, so a Secret a later reimage replaced is never
// named again (the sweep removes it), and the data, so a repeated reimage writes the
// Secret it wrote before and two different ones never share a name.
func reimageDriveName(uid string, gen int64, data map[string][]byte) string {
	sum := sha256.New()
	for _, k := range []string{"meta_data", "user_data"} {
		sum.Write([]byte(k))
		sum.Write([]byte{0})
		sum.Write(data[k])
		sum.Write([]byte{0})
	}
	return fmt.Sprintf("%s-g%d-%s", configDriveName(uid), gen, hex.EncodeToString(sum.Sum(nil))[:8])
}

// drive is the name of the machine's config-drive Secret.
func (rec *record) drive() string {
	if rec.ConfigDrive != "" {
		return rec.ConfigDrive
	}
	return configDriveName(rec.Labels[mri.LabelMachineUID])
}

// encodeRecord stores rec, with spec (its first-boot data left out), on the Host.
func encodeRecord(h *metalv1alpha1.Host, rec *record, spec *mriv1alpha1.MachineSpec) error {
	stored := proto.Clone(spec).(*mriv1alpha1.MachineSpec)
	if stored.FirstBoot != nil {
		stored.FirstBoot.Data = nil
	}
	raw, err := protojson.Marshal(stored)
	if err != nil {
		return err
	}
	rec.Spec = raw
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	h.Annotations[AnnotationMachine] = string(b)
	return nil
}

// decodeRecord reads the machine record of a Host; nil when the Host holds none.
func decodeRecord(h *metalv1alpha1.Host) (*record, *mriv1alpha1.MachineSpec, error) {
	raw, ok := h.Annotations[AnnotationMachine]
	if !ok || h.Spec.ConsumerRef == nil {
		return nil, nil, nil
	}
	rec := &record{}
	if err := json.Unmarshal([]byte(raw), rec); err != nil {
		return nil, nil, fmt.Errorf("annotation %s: %w", AnnotationMachine, err)
	}
	spec := &mriv1alpha1.MachineSpec{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(rec.Spec, spec); err != nil {
		return nil, nil, fmt.Errorf("annotation %s: spec: %w", AnnotationMachine, err)
	}
	if rec.ID == "" {
		return nil, nil, fmt.Errorf("annotation %s: no machine id", AnnotationMachine)
	}
	return rec, spec, nil
}
