package mapping

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Record is what ListMachines must return after a restart (CONTRACT.md R1) that the
// downstream Machine cannot say itself. The broker writes it in AnnotationRecord, with the
// same write as the spec change it records, so the two never disagree for long.
type Record struct {
	// Labels are the MRI labels, exactly as the caller set them (I3).
	Labels map[string]string `json:"labels"`
	// Annotations are the MRI annotations, as the caller set them at create.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Generation is the MRI generation (E4).
	Generation int64 `json:"generation"`
	// DownstreamGeneration is the downstream Machine's metadata.generation once this record's
	// write is applied: the downstream status describes this record's spec once its
	// observedGeneration reaches it (S1).
	DownstreamGeneration int64 `json:"downstreamGeneration"`
	// Spec is the MRI spec as protobuf JSON, without first_boot.data: that is in the
	// first-boot Secret, and Machines are readable by more people than Secrets.
	Spec json.RawMessage `json:"spec"`
}

// EncodeRecord is rec with spec (its first-boot data left out), as AnnotationRecord holds it.
func EncodeRecord(rec Record, spec *mriv1alpha1.MachineSpec) (string, error) {
	stored := proto.Clone(spec).(*mriv1alpha1.MachineSpec)
	if stored.FirstBoot != nil {
		stored.FirstBoot.Data = nil
	}
	raw, err := protojson.Marshal(stored)
	if err != nil {
		return "", fmt.Errorf("record: spec: %w", err)
	}
	rec.Spec = raw
	b, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	return string(b), nil
}

// DecodeRecord reads AnnotationRecord's value. Anything the broker would not have
// written (not JSON, no uid label, generations below 1, no spec) is an error naming it,
// so a hand-edited annotation is reported, never half believed.
func DecodeRecord(s string) (Record, *mriv1alpha1.MachineSpec, error) {
	var rec Record
	if err := json.Unmarshal([]byte(s), &rec); err != nil {
		return Record{}, nil, fmt.Errorf("annotation %s: %w", AnnotationRecord, err)
	}
	switch {
	case rec.Labels[mri.LabelMachineUID] == "":
		return Record{}, nil, fmt.Errorf("annotation %s: labels lack %s", AnnotationRecord, mri.LabelMachineUID)
	case rec.Generation < 1:
		return Record{}, nil, fmt.Errorf("annotation %s: generation %d is below 1", AnnotationRecord, rec.Generation)
	case rec.DownstreamGeneration < 1:
		return Record{}, nil, fmt.Errorf("annotation %s: downstreamGeneration %d is below 1", AnnotationRecord, rec.DownstreamGeneration)
	case len(rec.Spec) == 0 || string(rec.Spec) == "null":
		return Record{}, nil, fmt.Errorf("annotation %s: no spec", AnnotationRecord)
	}
	spec := &mriv1alpha1.MachineSpec{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(rec.Spec, spec); err != nil {
		return Record{}, nil, fmt.Errorf("annotation %s: spec: %w", AnnotationRecord, err)
	}
	return rec, spec, nil
}
