package mapping

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

func TestRecordRoundTripLeavesOutFirstBootData(t *testing.T) {
	m := machine()
	rec := Record{Labels: m.Metadata.Labels, Annotations: m.Metadata.Annotations, Generation: 3, DownstreamGeneration: 2}
	s, err := EncodeRecord(rec, m.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "cloud-config") || strings.Contains(s, "I2Nsb3VkLWNvbmZpZwo") {
		t.Fatalf("the record holds the first-boot data: %s", s)
	}
	if m.Spec.FirstBoot.Data == nil {
		t.Fatal("EncodeRecord changed the caller's spec")
	}
	got, spec, err := DecodeRecord(s)
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(m.Spec).(*mriv1alpha1.MachineSpec)
	want.FirstBoot.Data = nil
	if !proto.Equal(spec, want) {
		t.Fatalf("spec = %v\nwant %v", spec, want)
	}
	if got.Generation != 3 || got.DownstreamGeneration != 2 || got.Labels["anvil.dev/machine-uid"] != testUID || got.Annotations["note"] != "x" {
		t.Fatalf("record = %+v", got)
	}
}

func TestDecodeRecordRefusesWhatTheBrokerNeverWrites(t *testing.T) {
	spec := `"spec":{"class":"small"}`
	labels := `"labels":{"anvil.dev/machine-uid":"u"}`
	for _, tc := range []struct{ name, in, err string }{
		{"empty", ``, "unexpected end"},
		{"not JSON", `{`, "unexpected end"},
		{"a list", `[]`, "cannot unmarshal"},
		{"no uid label", `{"generation":1,"downstreamGeneration":1,` + spec + `}`, "labels lack"},
		{"generation 0", `{` + labels + `,"generation":0,"downstreamGeneration":1,` + spec + `}`, "generation 0"},
		{"downstream generation 0", `{` + labels + `,"generation":1,` + spec + `}`, "downstreamGeneration 0"},
		{"no spec", `{` + labels + `,"generation":1,"downstreamGeneration":1}`, "no spec"},
		{"null spec", `{` + labels + `,"generation":1,"downstreamGeneration":1,"spec":null}`, "no spec"},
		{"spec of the wrong type", `{` + labels + `,"generation":1,"downstreamGeneration":1,"spec":{"class":7}}`, "spec:"},
		{"labels of the wrong type", `{"labels":[1],"generation":1,"downstreamGeneration":1,` + spec + `}`, "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s, err := DecodeRecord(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.err) || s != nil {
				t.Fatalf("DecodeRecord(%q) = %v, %v; want an error saying %q", tc.in, s, err, tc.err)
			}
			if !strings.Contains(err.Error(), AnnotationRecord) {
				t.Fatalf("the error %q does not name the annotation", err)
			}
		})
	}
}

// FuzzDecodeRecord: no annotation value, however made, panics the broker; one it accepts
// is encoded back to a record that decodes to the same.
func FuzzDecodeRecord(f *testing.F) {
	m := machine()
	good, _ := EncodeRecord(Record{Labels: m.Metadata.Labels, Generation: 1, DownstreamGeneration: 1}, m.Spec)
	f.Add(good)
	f.Add(`{"labels":{"anvil.dev/machine-uid":"u"},"generation":1,"downstreamGeneration":1,"spec":{}}`)
	f.Add(`{"spec":"x"}`)
	f.Fuzz(func(t *testing.T, s string) {
		rec, spec, err := DecodeRecord(s)
		if err != nil {
			return
		}
		again, err := EncodeRecord(rec, spec)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		rec2, spec2, err := DecodeRecord(again)
		if err != nil || !proto.Equal(spec, spec2) || rec2.Generation != rec.Generation || rec2.DownstreamGeneration != rec.DownstreamGeneration {
			t.Fatalf("re-encoded record differs: %v", err)
		}
	})
}
