package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

// A remediation without strategies reboots, then power-cycles, once each, five minutes apart:
// what a MachineHealthCheck's template that says nothing gets.
func TestAnvilRemediationDefaults(t *testing.T) {
	installed(t)
	ctx := context.Background()
	r := &infrav1.AnvilRemediation{ObjectMeta: metav1.ObjectMeta{Name: unique("defaults"), Namespace: "default"}}
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	want := []infrav1.RemediationStrategy{
		{Type: infrav1.RemediationReboot, Retries: 1, Timeout: metav1.Duration{Duration: 5 * time.Minute}},
		{Type: infrav1.RemediationPowerCycle, Retries: 1, Timeout: metav1.Duration{Duration: 5 * time.Minute}},
	}
	if len(r.Spec.Strategies) != len(want) {
		t.Fatalf("defaulted strategies %+v, want %+v", r.Spec.Strategies, want)
	}
	for i := range want {
		if r.Spec.Strategies[i] != want[i] {
			t.Errorf("strategy %d = %+v, want %+v", i, r.Spec.Strategies[i], want[i])
		}
	}
}

func TestAnvilRemediationRejectsInvalid(t *testing.T) {
	installed(t)
	reboot := func(mut func(*infrav1.RemediationStrategy)) []infrav1.RemediationStrategy {
		s := infrav1.RemediationStrategy{Type: infrav1.RemediationReboot, Retries: 1, Timeout: metav1.Duration{Duration: time.Minute}}
		mut(&s)
		return []infrav1.RemediationStrategy{s}
	}
	for _, tc := range []struct {
		name       string
		strategies []infrav1.RemediationStrategy
		message    string
	}{
		{"unknown type", reboot(func(s *infrav1.RemediationStrategy) { s.Type = "Reinstall" }), `Unsupported value: "Reinstall"`},
		{"zero retries", reboot(func(s *infrav1.RemediationStrategy) { s.Retries = -1 }), "should be greater than or equal to 1"},
		{"too many retries", reboot(func(s *infrav1.RemediationStrategy) { s.Retries = 11 }), "should be less than or equal to 10"},
		{"timeout too short", reboot(func(s *infrav1.RemediationStrategy) { s.Timeout.Duration = time.Second }), "timeout must be between 10s and 2h"},
		{"timeout too long", reboot(func(s *infrav1.RemediationStrategy) { s.Timeout.Duration = 3 * time.Hour }), "timeout must be between 10s and 2h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &infrav1.AnvilRemediation{ObjectMeta: metav1.ObjectMeta{Name: unique("invalid"), Namespace: "default"},
				Spec: infrav1.AnvilRemediationSpec{Strategies: tc.strategies}}
			wantInvalid(t, "create", env.Client.Create(context.Background(), r), tc.message)
		})
	}
}
