package loadbalancer

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

func TestCandidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Ports
		used []uint16
		want []uint16
	}{
		{"all free", Ports{10, 12}, nil, []uint16{10, 11, 12}},
		{"used skipped", Ports{10, 12}, []uint16{10, 12, 99}, []uint16{11}},
		{"all used", Ports{10, 11}, []uint16{10, 11}, nil},
		{"one port", Ports{7, 7}, nil, []uint16{7}},
		{"backwards", Ports{12, 10}, nil, nil},
		{"zero", Ports{}, nil, nil},
		{"top of the port space", Ports{65534, 65535}, nil, []uint16{65534, 65535}},
	} {
		used := map[uint16]bool{}
		for _, p := range tc.used {
			used[p] = true
		}
		if got := tc.r.Candidates(used); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}

func TestBackends(t *testing.T) {
	subnet := netip.MustParsePrefix("10.200.0.0/24")
	m := func(state computev1alpha1.MachineState, deleting bool, addrs ...computev1alpha1.MachineAddress) computev1alpha1.Machine {
		var mm computev1alpha1.Machine
		mm.Status.State, mm.Status.Addresses = state, addrs
		if deleting {
			mm.DeletionTimestamp = &metav1.Time{}
		}
		return mm
	}
	ip := func(a string) computev1alpha1.MachineAddress {
		return computev1alpha1.MachineAddress{Type: "InternalIP", Address: a}
	}
	run := computev1alpha1.MachineStateRunning
	got := Backends([]computev1alpha1.Machine{
		m(run, false, ip("10.0.2.15"), ip("10.200.0.12")),                                        // its segment address, not the other
		m(run, false, ip("10.200.0.3")),                                                          // sorted first
		m(run, false, computev1alpha1.MachineAddress{Type: "ExternalIP", Address: "10.200.0.4"}), // not an InternalIP
		m(run, true, ip("10.200.0.5")),                                                           // being deleted
		m(computev1alpha1.MachineStateShutdown, false, ip("10.200.0.6")),                         // not running
		m(run, false, ip("127.0.0.1"), ip("not an address")),                                     // outside the subnet
		m(run, false, ip("10.200.0.3")),                                                          // the same address again
	}, subnet, 6443)
	want := []netip.AddrPort{netip.MustParseAddrPort("10.200.0.3:6443"), netip.MustParseAddrPort("10.200.0.12:6443")}
	if !slices.Equal(got, want) {
		t.Errorf("Backends = %v, want %v", got, want)
	}
}

func TestStatus(t *testing.T) {
	host, gw := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.200.0.1")
	recorded := &computev1alpha1.Endpoint{Host: "127.0.0.1", Port: 16450}
	for _, tc := range []struct {
		name         string
		had          *computev1alpha1.Endpoint
		o            Observed
		status       metav1.ConditionStatus
		reason       string
		wantEndpoint *computev1alpha1.Endpoint
	}{
		{"serving", nil, Observed{Segment: true, Port: 16443, SegmentOpen: true, Host: host, Gateway: gw},
			metav1.ConditionTrue, computev1alpha1.ReasonServing, &computev1alpha1.Endpoint{Host: "127.0.0.1", Port: 16443}},
		{"not a segment", nil, Observed{Segment: false},
			metav1.ConditionFalse, computev1alpha1.ReasonNoSuchSegment, nil},
		{"no port left", nil, Observed{Segment: true, ListenErr: errors.New("taken")},
			metav1.ConditionFalse, computev1alpha1.ReasonPortsExhausted, nil},
		{"recorded port held elsewhere: kept", recorded, Observed{Segment: true, ListenErr: errors.New("in use")},
			metav1.ConditionFalse, computev1alpha1.ReasonEndpointUnavailable, recorded},
		{"network no longer a segment: endpoint kept", recorded, Observed{Segment: false},
			metav1.ConditionFalse, computev1alpha1.ReasonNoSuchSegment, recorded},
	} {
		lb := &computev1alpha1.LoadBalancer{}
		lb.Generation = 3
		lb.Status.Endpoint = tc.had
		st := Status(lb, tc.o)
		c := st.Conditions[0]
		if c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 {
			t.Errorf("%s: Ready %s/%s (generation %d), want %s/%s", tc.name, c.Status, c.Reason, c.ObservedGeneration, tc.status, tc.reason)
		}
		if tc.wantEndpoint == nil && st.Endpoint != nil || tc.wantEndpoint != nil && (st.Endpoint == nil || *st.Endpoint != *tc.wantEndpoint) {
			t.Errorf("%s: endpoint %+v, want %+v", tc.name, st.Endpoint, tc.wantEndpoint)
		}
		if c.Status == metav1.ConditionFalse && c.Message == "" {
			t.Errorf("%s: a False Ready without a message", tc.name)
		}
	}
}
