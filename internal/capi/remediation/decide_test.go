package remediation

import (
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
)

var t0 = time.Unix(1_700_000_000, 0)

func strategy(typ infrav1.RemediationType, retries int32, timeout time.Duration) infrav1.RemediationStrategy {
	return infrav1.RemediationStrategy{Type: typ, Retries: retries, Timeout: metav1.Duration{Duration: timeout}}
}

func remediation(strategies ...infrav1.RemediationStrategy) *infrav1.AnvilRemediation {
	return &infrav1.AnvilRemediation{ObjectMeta: metav1.ObjectMeta{Name: "md-0-x", UID: types.UID("u1")},
		Spec: infrav1.AnvilRemediationSpec{Strategies: strategies}}
}

func running() *computev1alpha1.Machine {
	return &computev1alpha1.Machine{Spec: computev1alpha1.MachineSpec{Power: computev1alpha1.PowerOn},
		Status: computev1alpha1.MachineStatus{State: computev1alpha1.MachineStateRunning}}
}

// world applies plans to a remediation and its machine as the controller and a runtime
// would: the status is stored, the power is set, and the runtime reports it off when
// offAfter steps have passed since it was asked.
type world struct {
	r        *infrav1.AnvilRemediation
	m        *computev1alpha1.Machine
	reboots  []string
	gaveUp   bool
	offAsked int
}

func (w *world) step(now time.Time, offAfter int) Plan {
	p := Decide(Input{Remediation: w.r, Machine: w.m, Now: now})
	if p.Reboot != "" && (len(w.reboots) == 0 || w.reboots[len(w.reboots)-1] != p.Reboot) {
		w.reboots = append(w.reboots, p.Reboot)
	}
	if p.Power != "" {
		if p.Power == computev1alpha1.PowerOff && w.m.Spec.Power != computev1alpha1.PowerOff {
			w.offAsked = 0
		}
		w.m.Spec.Power = p.Power
	}
	if w.m.Spec.Power == computev1alpha1.PowerOff {
		if w.offAsked++; offAfter >= 0 && w.offAsked > offAfter {
			w.m.Status.State = computev1alpha1.MachineStateShutdown
		}
	} else {
		w.m.Status.State = computev1alpha1.MachineStateRunning
	}
	w.gaveUp = w.gaveUp || p.GiveUp
	w.r.Status = p.Status
	w.r.Status.Conditions = []metav1.Condition{p.Ready}
	return p
}

func TestDecide(t *testing.T) {
	minute := time.Minute
	reboot2 := strategy(infrav1.RemediationReboot, 2, minute)
	cycle := strategy(infrav1.RemediationPowerCycle, 1, minute)

	t.Run("reboots first, with a token per try", func(t *testing.T) {
		w := &world{r: remediation(reboot2, cycle), m: running()}
		p := w.step(t0, 0)
		if p.Reboot != "remediation-u1-1" || p.Power != "" || p.GiveUp || p.After != minute {
			t.Fatalf("first step %+v", p)
		}
		if p.Ready.Status != metav1.ConditionTrue || p.Ready.Reason != ReasonTrying {
			t.Errorf("Ready %+v", p.Ready)
		}
		if p := w.step(t0.Add(30*time.Second), 0); p.Reboot != "" || p.After != 30*time.Second {
			t.Errorf("within the timeout nothing is done and the wait is what is left: %+v", p)
		}
		if p := w.step(t0.Add(minute), 0); p.Reboot != "remediation-u1-2" || w.r.Status.Try != 2 || w.r.Status.Tries != 2 {
			t.Errorf("the second try reboots again: %+v status %+v", p, w.r.Status)
		}
	})
	t.Run("a power cycle waits for off, then powers on and waits from there", func(t *testing.T) {
		w := &world{r: remediation(cycle), m: running()}
		if p := w.step(t0, 1); p.Power != computev1alpha1.PowerOff || w.r.Status.Phase != infrav1.RemediationPhaseWaitingForPowerOff {
			t.Fatalf("first step %+v status %+v", p, w.r.Status)
		}
		w.step(t0.Add(time.Second), 1) // the runtime reports it off after this step
		p := w.step(t0.Add(2*time.Second), 1)
		if p.Power != computev1alpha1.PowerOn || w.r.Status.Phase != infrav1.RemediationPhaseRunning || !w.r.Status.LastTriedAt.Time.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("off: powered on %+v status %+v", p, w.r.Status)
		}
		if p := w.step(t0.Add(2*time.Second+minute), 1); !p.GiveUp || w.r.Status.Phase != infrav1.RemediationPhaseFailed {
			t.Errorf("last try timed out: gives up %+v", p)
		}
		if p := w.step(t0.Add(time.Hour), 1); !p.GiveUp || p.Reboot != "" || p.Power != "" || p.Ready.Reason != ReasonGaveUp {
			t.Errorf("failed stays failed, and keeps asking for the replacement: %+v", p)
		}
	})
	t.Run("a machine that never powers off is powered on and the next try made", func(t *testing.T) {
		w := &world{r: remediation(cycle, reboot2), m: running()}
		w.step(t0, -1)
		p := w.step(t0.Add(minute), -1)
		if p.Power != computev1alpha1.PowerOn || p.Reboot != "remediation-u1-2" || w.r.Status.Strategy != 1 {
			t.Errorf("%+v status %+v", p, w.r.Status)
		}
	})
	t.Run("the machine gone gives up at once", func(t *testing.T) {
		p := Decide(Input{Remediation: remediation(reboot2), Now: t0})
		if !p.GiveUp || p.Ready.Reason != ReasonMachineGone || p.Ready.Status != metav1.ConditionFalse {
			t.Errorf("%+v", p)
		}
	})
	t.Run("no strategies: the defaults", func(t *testing.T) {
		p := Decide(Input{Remediation: remediation(), Machine: running(), Now: t0})
		if p.Reboot == "" || p.After != 5*time.Minute {
			t.Errorf("%+v", p)
		}
	})
	t.Run("a status pointing past the strategies starts over", func(t *testing.T) {
		r := remediation(reboot2)
		r.Status = infrav1.AnvilRemediationStatus{Phase: infrav1.RemediationPhaseRunning, Strategy: 5, Try: 1, Tries: 1, LastTriedAt: &metav1.Time{Time: t0}}
		p := Decide(Input{Remediation: r, Machine: running(), Now: t0})
		if p.Reboot != "remediation-u1-2" || p.Status.Strategy != 0 || p.Status.Try != 1 {
			t.Errorf("%+v", p)
		}
	})
	t.Run("a crash after the power-off was asked but before the status: asked again, one try", func(t *testing.T) {
		w := &world{r: remediation(cycle), m: running()}
		p := Decide(Input{Remediation: w.r, Machine: w.m, Now: t0})
		w.m.Spec.Power = p.Power // applied; the status write is lost
		again := Decide(Input{Remediation: w.r, Machine: w.m, Now: t0.Add(time.Second)})
		if again.Power != computev1alpha1.PowerOff || again.Status.Tries != 1 {
			t.Errorf("%+v", again)
		}
	})
}

// Property: whatever the strategies and however slow the runtime, a remediation makes
// exactly the tries its strategies allow, each reboot once, gives up only after the last,
// and leaves the machine powered on.
func TestRemediationProperty(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		var ss []infrav1.RemediationStrategy
		allowed := int32(0)
		for range 1 + rnd.IntN(4) {
			typ := infrav1.RemediationReboot
			if rnd.IntN(2) == 0 {
				typ = infrav1.RemediationPowerCycle
			}
			n := int32(1 + rnd.IntN(3))
			ss = append(ss, strategy(typ, n, time.Duration(1+rnd.IntN(5))*time.Minute))
			allowed += n
		}
		w := &world{r: remediation(ss...), m: running()}
		now := t0
		offAfter := rnd.IntN(4) - 1 // -1: never goes off
		for step := 0; step < 1000 && !w.gaveUp; step++ {
			w.step(now, offAfter)
			now = now.Add(time.Duration(1+rnd.IntN(90)) * time.Second)
		}
		if !w.gaveUp {
			t.Fatalf("case %d: never gave up (%+v)", i, w.r.Status)
		}
		if w.r.Status.Tries != allowed {
			t.Fatalf("case %d: %d tries, strategies allow %d", i, w.r.Status.Tries, allowed)
		}
		seen := map[string]bool{}
		for _, tok := range w.reboots {
			if seen[tok] {
				t.Fatalf("case %d: reboot %s asked twice", i, tok)
			}
			seen[tok] = true
		}
		if w.m.Spec.Power != computev1alpha1.PowerOn {
			t.Fatalf("case %d: left the machine powered %s", i, w.m.Spec.Power)
		}
	}
}
