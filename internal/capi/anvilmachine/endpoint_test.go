package anvilmachine

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

func TestEndpointCondition(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	base := EndpointInput{ControlPlane: true, RunningSince: now.Add(-20 * time.Minute), Endpoint: clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
		Grace: 15 * time.Minute, Now: now}
	with := func(f func(*EndpointInput)) EndpointInput { in := base; f(&in); return in }
	for _, tc := range []struct {
		name     string
		in       EndpointInput
		accepted bool
		dial     bool
		// status and reason of the condition; "" for none.
		status metav1.ConditionStatus
		reason string
	}{
		{"a worker has none", with(func(in *EndpointInput) { in.ControlPlane = false }), false, false, "", ""},
		{"a machine not running has none", with(func(in *EndpointInput) { in.RunningSince = time.Time{} }), false, false, "", ""},
		{"a cluster without an endpoint has none", with(func(in *EndpointInput) { in.Endpoint = clusterv1.APIEndpoint{} }), false, false, "", ""},
		{"accepted", base, true, true, metav1.ConditionTrue, infrav1.ReasonEndpointAccepts},
		{"refused past the grace", base, false, true, metav1.ConditionFalse, infrav1.ReasonEndpointUnreachable},
		{"refused within the grace", with(func(in *EndpointInput) { in.RunningSince = now.Add(-time.Minute) }), false, true, metav1.ConditionUnknown, infrav1.ReasonWaitingForAPIServer},
		{"no grace: refused is unreachable at once", with(func(in *EndpointInput) { in.Grace, in.RunningSince = 0, now }), false, true, metav1.ConditionFalse, infrav1.ReasonEndpointUnreachable},
		{"initialized: not dialled, True", with(func(in *EndpointInput) { in.Initialized = true }), false, false, metav1.ConditionTrue, infrav1.ReasonControlPlaneInitialized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, dial := EndpointAddress(tc.in)
			if dial != tc.dial || (dial && addr != "192.0.2.10:6443") {
				t.Errorf("EndpointAddress = %q, %v; want dialled %v", addr, dial, tc.dial)
			}
			c := EndpointCondition(tc.in, tc.accepted)
			if tc.status == "" {
				if c != nil {
					t.Fatalf("condition %+v, want none", c)
				}
				return
			}
			if c == nil || c.Type != infrav1.ConditionControlPlaneEndpointReachable || c.Status != tc.status || c.Reason != tc.reason ||
				!strings.Contains(c.Message, "192.0.2.10:6443") {
				t.Fatalf("condition %+v, want %s %s naming the endpoint", c, tc.status, tc.reason)
			}
		})
	}
}

// Whatever the input: a condition only for a running control-plane machine of a cluster with
// an endpoint; True exactly when the control plane is initialized or the endpoint accepted;
// False only past the grace; always a Reason; a dial only where a condition is given and the
// control plane is not initialized; the message never says how a dial failed, and a recheck
// finding the same gives the same condition.
func TestEndpointConditionProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		in := EndpointInput{
			ControlPlane: rapid.Bool().Draw(t, "controlPlane"),
			Initialized:  rapid.Bool().Draw(t, "initialized"),
			Grace:        time.Duration(rapid.IntRange(0, 30).Draw(t, "graceMinutes")) * time.Minute,
			Now:          now,
		}
		if rapid.Bool().Draw(t, "running") {
			in.RunningSince = now.Add(-time.Duration(rapid.IntRange(0, 3600).Draw(t, "ranSeconds")) * time.Second)
		}
		if rapid.Bool().Draw(t, "endpoint") {
			in.Endpoint = clusterv1.APIEndpoint{Host: rapid.SampledFrom([]string{"10.0.0.1", "api.example", "::1"}).Draw(t, "host"),
				Port: int32(rapid.IntRange(1, 65535).Draw(t, "port"))}
		}
		accepted := rapid.Bool().Draw(t, "accepted")
		c := EndpointCondition(in, accepted)
		_, dial := EndpointAddress(in)
		eligible := in.ControlPlane && !in.RunningSince.IsZero() && in.Endpoint.IsValid()
		if (c != nil) != eligible {
			t.Fatalf("condition %+v for eligible=%v", c, eligible)
		}
		if dial != (eligible && !in.Initialized) {
			t.Fatalf("dial %v for eligible=%v initialized=%v", dial, eligible, in.Initialized)
		}
		if c == nil {
			return
		}
		if c.Reason == "" || c.Message == "" {
			t.Fatalf("condition without a reason or message: %+v", c)
		}
		if (c.Status == metav1.ConditionTrue) != (in.Initialized || accepted) {
			t.Fatalf("status %s for initialized=%v accepted=%v", c.Status, in.Initialized, accepted)
		}
		if c.Status == metav1.ConditionFalse && in.Now.Sub(in.RunningSince) < in.Grace {
			t.Fatalf("unreachable within the grace: %+v", c)
		}
		// A recheck that finds the same gives the same condition: no status write.
		later := in
		later.Now = in.Now.Add(30 * time.Second)
		if again := EndpointCondition(later, accepted); (in.Now.Sub(in.RunningSince) < in.Grace) == (later.Now.Sub(later.RunningSince) < later.Grace) &&
			(again == nil || *again != *c) {
			t.Fatalf("a recheck 30 s later says otherwise: %+v, then %+v", c, again)
		}
		for _, leak := range []string{"refused", "timeout", "no route"} {
			if strings.Contains(c.Message, leak) {
				t.Fatalf("the message says how the dial failed (%q): %s", leak, c.Message)
			}
		}
	})
}
