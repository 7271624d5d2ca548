package mutate

import (
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

const (
	invalid       = mriv1alpha1.ErrorReason_ERROR_REASON_INVALID
	alreadyExists = mriv1alpha1.ErrorReason_ERROR_REASON_ALREADY_EXISTS
	none          = mriv1alpha1.ErrorReason_ERROR_REASON_UNSPECIFIED
)

func emptyDisk(name string, size int64) *mriv1alpha1.Volume {
	return &mriv1alpha1.Volume{Name: name, Source: &mriv1alpha1.Volume_EmptyDisk{EmptyDisk: &mriv1alpha1.EmptyDisk{SizeBytes: size}}}
}

func nic(name, network string) *mriv1alpha1.NetworkInterface {
	return &mriv1alpha1.NetworkInterface{Name: name, Network: network}
}

// specWith is a spec holding the given volumes and network interfaces.
func specWith(vols []*mriv1alpha1.Volume, nics ...*mriv1alpha1.NetworkInterface) *mriv1alpha1.MachineSpec {
	return &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON, Volumes: vols, NetworkInterfaces: nics}
}

func vols(v ...*mriv1alpha1.Volume) []*mriv1alpha1.Volume { return v }

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want mriv1alpha1.ErrorReason
	}{
		{"power unspecified", CheckPower(mriv1alpha1.Power_POWER_UNSPECIFIED), invalid},
		{"power on", CheckPower(mriv1alpha1.Power_POWER_ON), none},
		{"power off", CheckPower(mriv1alpha1.Power_POWER_OFF), none},
		{"no reboot token", CheckRebootToken(""), invalid},
		{"reboot token", CheckRebootToken("r1"), none},
	} {
		if got := mri.ReasonOf(tc.err); got != tc.want || (tc.want == none) != (tc.err == nil) {
			t.Errorf("%s: %v, want reason %s", tc.name, tc.err, tc.want)
		}
	}
}

func TestSetPower(t *testing.T) {
	on, off := mriv1alpha1.Power_POWER_ON, mriv1alpha1.Power_POWER_OFF
	for _, tc := range []struct {
		name      string
		have, set mriv1alpha1.Power
		changed   bool
	}{
		{"same", on, on, false},
		{"off", on, off, true},
		{"on", off, on, true},
	} {
		spec := &mriv1alpha1.MachineSpec{Power: tc.have}
		if changed := SetPower(spec, tc.set); changed != tc.changed || spec.Power != tc.set {
			t.Errorf("%s: changed %v, power %s; want %v, %s", tc.name, changed, spec.Power, tc.changed, tc.set)
		}
	}
}

func TestSetLabels(t *testing.T) {
	uid := mri.LabelMachineUID
	for _, tc := range []struct {
		name      string
		have, set map[string]string
		want      map[string]string
		changed   bool
	}{
		{"same", map[string]string{uid: "u", "a": "1"}, map[string]string{uid: "u", "a": "1"}, map[string]string{uid: "u", "a": "1"}, false},
		{"uid left out is kept", map[string]string{uid: "u", "a": "1"}, map[string]string{"a": "1"}, map[string]string{uid: "u", "a": "1"}, false},
		{"replaced", map[string]string{uid: "u", "a": "1"}, map[string]string{"b": "2"}, map[string]string{uid: "u", "b": "2"}, true},
		{"uid never changed", map[string]string{uid: "u"}, map[string]string{uid: "other"}, map[string]string{uid: "u"}, false},
		{"all dropped but the uid", map[string]string{uid: "u", "a": "1"}, nil, map[string]string{uid: "u"}, true},
	} {
		md := &mriv1alpha1.ObjectMetadata{Labels: maps.Clone(tc.have)}
		sent := maps.Clone(tc.set)
		changed := SetLabels(md, tc.set)
		if changed != tc.changed || !maps.Equal(md.Labels, tc.want) {
			t.Errorf("%s: changed %v, labels %v; want %v, %v", tc.name, changed, md.Labels, tc.changed, tc.want)
		}
		if !maps.Equal(tc.set, sent) {
			t.Errorf("%s: the caller's labels were changed to %v", tc.name, tc.set)
		}
	}
}

func TestAttachVolume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    *mriv1alpha1.MachineSpec
		v       *mriv1alpha1.Volume
		changed bool
		reason  mriv1alpha1.ErrorReason
		want    []string
	}{
		{"new", specWith(vols(emptyDisk("root", 1))), emptyDisk("data", 2), true, none, []string{"root", "data"}},
		{"first", specWith(nil), emptyDisk("data", 2), true, none, []string{"data"}},
		{"repeated", specWith(vols(emptyDisk("data", 2))), emptyDisk("data", 2), false, none, []string{"data"}},
		{"other source", specWith(vols(emptyDisk("data", 2))), emptyDisk("data", 3), false, alreadyExists, []string{"data"}},
	} {
		changed, err := AttachVolume(tc.spec, tc.v)
		if changed != tc.changed || mri.ReasonOf(err) != tc.reason || (tc.reason == none) != (err == nil) {
			t.Errorf("%s: changed %v, err %v; want %v, reason %s", tc.name, changed, err, tc.changed, tc.reason)
		}
		if got := names(tc.spec.Volumes); !slices.Equal(got, tc.want) {
			t.Errorf("%s: volumes %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An attached volume is a copy: the caller's value may change afterwards.
func TestAttachCopies(t *testing.T) {
	spec, v := specWith(nil), emptyDisk("data", 2)
	if _, err := AttachVolume(spec, v); err != nil {
		t.Fatal(err)
	}
	v.Name = "changed"
	if spec.Volumes[0].Name != "data" || spec.Volumes[0] == v {
		t.Fatalf("the spec shares the caller's volume: %v", spec.Volumes[0])
	}
}

func TestDetachVolume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    *mriv1alpha1.MachineSpec
		detach  string
		changed bool
		want    []string
	}{
		{"middle", specWith(vols(emptyDisk("a", 1), emptyDisk("b", 1), emptyDisk("c", 1))), "b", true, []string{"a", "c"}},
		{"last", specWith(vols(emptyDisk("a", 1))), "a", true, nil},
		{"never attached", specWith(vols(emptyDisk("a", 1))), "b", false, []string{"a"}},
		{"none at all", specWith(nil), "a", false, nil},
	} {
		if changed := DetachVolume(tc.spec, tc.detach); changed != tc.changed {
			t.Errorf("%s: changed %v, want %v", tc.name, changed, tc.changed)
		}
		if got := names(tc.spec.Volumes); !slices.Equal(got, tc.want) {
			t.Errorf("%s: volumes %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAttachDetachNetworkInterface(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    *mriv1alpha1.MachineSpec
		change  func(*mriv1alpha1.MachineSpec) (bool, error)
		changed bool
		reason  mriv1alpha1.ErrorReason
		want    []string
	}{
		{"attach new", specWith(nil, nic("eth0", "default")),
			func(s *mriv1alpha1.MachineSpec) (bool, error) {
				return AttachNetworkInterface(s, nic("eth1", "default"))
			},
			true, none, []string{"eth0", "eth1"}},
		{"attach repeated", specWith(nil, nic("eth0", "default")),
			func(s *mriv1alpha1.MachineSpec) (bool, error) {
				return AttachNetworkInterface(s, nic("eth0", "default"))
			},
			false, none, []string{"eth0"}},
		{"attach other network", specWith(nil, nic("eth0", "default")),
			func(s *mriv1alpha1.MachineSpec) (bool, error) {
				return AttachNetworkInterface(s, nic("eth0", "storage"))
			},
			false, alreadyExists, []string{"eth0"}},
		{"detach", specWith(nil, nic("eth0", "default"), nic("eth1", "default")),
			func(s *mriv1alpha1.MachineSpec) (bool, error) { return DetachNetworkInterface(s, "eth0"), nil },
			true, none, []string{"eth1"}},
		{"detach never attached", specWith(nil, nic("eth0", "default")),
			func(s *mriv1alpha1.MachineSpec) (bool, error) { return DetachNetworkInterface(s, "eth9"), nil },
			false, none, []string{"eth0"}},
	} {
		before := proto.Clone(tc.spec).(*mriv1alpha1.MachineSpec)
		changed, err := tc.change(tc.spec)
		if changed != tc.changed || mri.ReasonOf(err) != tc.reason || (tc.reason == none) != (err == nil) {
			t.Errorf("%s: changed %v, err %v; want %v, reason %s", tc.name, changed, err, tc.changed, tc.reason)
		}
		if got := names(tc.spec.NetworkInterfaces); !slices.Equal(got, tc.want) {
			t.Errorf("%s: network interfaces %v, want %v", tc.name, got, tc.want)
		}
		if !changed && !proto.Equal(before, tc.spec) {
			t.Errorf("%s: no change reported, but the spec changed to %v", tc.name, tc.spec)
		}
	}
}

func names[T named](list []T) []string {
	var out []string
	for _, x := range list {
		out = append(out, x.GetName())
	}
	return out
}
