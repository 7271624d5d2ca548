package machineplan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

const pool = "pool-1"

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// machine is a Machine bound to pool, with the finalizer, that ran img:1 and is Running.
func machine(mods ...func(*computev1alpha1.Machine)) *computev1alpha1.Machine {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "uid-1", Generation: 1,
		Finalizers: []string{computev1alpha1.FinalizerRuntimeMachine}}}
	m.Spec.Image = "reg/img:1"
	m.Spec.MachinePoolRef = &computev1alpha1.LocalObjectReference{Name: pool}
	m.Status = computev1alpha1.MachineStatus{ObservedGeneration: 1, State: computev1alpha1.MachineStateRunning, MachineID: "rm-1",
		Pool: pool, Image: &computev1alpha1.BootedImage{Reference: "reg/img:1", Digest: "sha256:1"}}
	for _, f := range mods {
		f(m)
	}
	return m
}

// runtimeMachine is the Machine's settled runtime machine, running img:1, powered on.
func runtimeMachine(mods ...func(*mriv1alpha1.Machine)) *mriv1alpha1.Machine {
	rm := &mriv1alpha1.Machine{
		Metadata: &mriv1alpha1.ObjectMetadata{Id: "rm-1", Generation: 1, CreatedAtUnixNano: 1,
			Labels: map[string]string{mri.LabelMachineUID: "uid-1"}},
		Spec: &mriv1alpha1.MachineSpec{Power: mriv1alpha1.Power_POWER_ON,
			Image: &mriv1alpha1.Image{Reference: "reg/img:1", Digest: "sha256:1"}},
		Status: &mriv1alpha1.MachineStatus{ObservedGeneration: 1, State: mriv1alpha1.MachineState_MACHINE_STATE_RUNNING},
	}
	for _, f := range mods {
		f(rm)
	}
	return rm
}

func newPass(m *computev1alpha1.Machine, rm *mriv1alpha1.Machine) *Pass {
	return &Pass{Pool: pool, Machine: m, Runtime: rm, Now: t0, StuckAfter: 30 * time.Second}
}

// kinds is the pass's actions by kind, for messages.
func kinds(as []Action) string {
	var out []string
	for _, a := range as {
		out = append(out, kindName[a.Kind])
	}
	return strings.Join(out, ",")
}

var kindName = map[Kind]string{KindInvalid: "Invalid", DeleteGarbage: "DeleteGarbage", AddFinalizer: "AddFinalizer",
	Create: "Create", Reimage: "Reimage", CheckFirstBoot: "CheckFirstBoot", SetPower: "SetPower", Reboot: "Reboot",
	DeleteRuntime: "DeleteRuntime", MarkTerminating: "MarkTerminating", RemoveFinalizer: "RemoveFinalizer",
	WriteStatus: "WriteStatus", Wait: "Wait"}

// shell stands for the poollet: it answers each action the way outcome says.
type shell struct {
	// created is the machine Create makes; nil: Create finds a problem.
	created *mriv1alpha1.Machine
	// refuse: the runtime refuses Create (or Reimage) with this message.
	refuse string
	// reimage: the runtime starts the reimage (else its problem is the condition to show).
	reimage bool
	// boot is what CheckFirstBoot reads (nil: the Secret is missing).
	boot *mriv1alpha1.FirstBootConfig
	// still is what the runtime holds after DeleteRuntime.
	still *mriv1alpha1.Machine
	// settles: the runtime's answers to SetPower and Reboot are settled at once.
	settles bool
	events  []Event
}

var missingSecret = metav1.Condition{Type: computev1alpha1.ConditionIgnitionReady, Status: metav1.ConditionFalse,
	Reason: "SecretNotFound", Message: "Secret ns/boot is not there"}

// run drives the pass to its end and returns its actions; a pass that does not end within
// 20 actions fails the test.
func (s *shell) run(t testing.TB, p *Pass) []Action {
	var done []Action
	for range 20 {
		a := p.Next()
		done = append(done, a)
		if a.Ends() {
			s.events = append(s.events, a.Events...)
			return done
		}
		s.apply(p, a)
	}
	t.Fatalf("the pass did not end: %s", kinds(done))
	return nil
}

func clone(rm *mriv1alpha1.Machine) *mriv1alpha1.Machine {
	c := &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{}, Spec: &mriv1alpha1.MachineSpec{}, Status: &mriv1alpha1.MachineStatus{}}
	*c.Metadata, *c.Spec, *c.Status = *rm.GetMetadata(), *rm.GetSpec(), *rm.GetStatus() //nolint:govet // a test's shallow copy
	return c
}

func last(as []Action) Action { return as[len(as)-1] }

func condition(a Action, typ string) *metav1.Condition {
	if a.Status == nil {
		return nil
	}
	return meta.FindStatusCondition(a.Status.Conditions, typ)
}

func TestPass(t *testing.T) {
	pending := runtimeMachine(func(rm *mriv1alpha1.Machine) {
		rm.Status.ObservedGeneration, rm.Status.State = 0, mriv1alpha1.MachineState_MACHINE_STATE_PENDING
	})
	fresh := func(m *computev1alpha1.Machine) { m.Status = computev1alpha1.MachineStatus{} }
	for _, tc := range []struct {
		name    string
		m       *computev1alpha1.Machine
		rm      *mriv1alpha1.Machine
		garbage []string
		lag     Lag
		sh      shell
		want    string // the actions, by kind
		check   func(a Action, p *Pass, events []Event) string
	}{
		{name: "a new Machine: created, then Pending with the runtime machine's id until it settles",
			m: machine(fresh), sh: shell{created: pending}, want: "Create,WriteStatus",
			check: func(a Action, _ *Pass, evs []Event) string {
				if a.Status.MachineID != "rm-1" || a.Status.State != computev1alpha1.MachineStatePending || !a.StaleIsFine || a.After != 30*time.Second {
					return fmt.Sprintf("status %+v, stale fine %v, after %v", a.Status, a.StaleIsFine, a.After)
				}
				if len(evs) != 1 || evs[0].Reason != computev1alpha1.EventCreated {
					return fmt.Sprintf("events %+v, want Created", evs)
				}
				return ""
			}},
		{name: "created again after its machine was lost: no Created Event", m: machine(), sh: shell{created: runtimeMachine()},
			want: "Create,WriteStatus", check: func(a Action, _ *Pass, evs []Event) string {
				if len(evs) != 0 {
					return fmt.Sprintf("events %+v, want none (the state did not change)", evs)
				}
				return ""
			}},
		{name: "a Machine pinned by its user gets the finalizer first", m: machine(fresh, func(m *computev1alpha1.Machine) { m.Finalizers = nil }),
			sh: shell{created: pending}, want: "AddFinalizer,Create,WriteStatus"},
		{name: "the runtime refuses: Scheduled False, back to the scheduler, no timed retry", m: machine(fresh), sh: shell{refuse: "no room"},
			want: "Create,WriteStatus", check: func(a Action, _ *Pass, _ []Event) string {
				c := condition(a, computev1alpha1.ConditionScheduled)
				if c == nil || c.Reason != computev1alpha1.ReasonRuntimeRefused || !strings.Contains(c.Message, "no room") || a.After != 0 {
					return fmt.Sprintf("Scheduled %+v, after %v", c, a.After)
				}
				return ""
			}},
		{name: "a Secret not there yet: IgnitionReady False, read again soon", m: machine(fresh), sh: shell{},
			want: "Create,WriteStatus", check: func(a Action, p *Pass, _ []Event) string {
				if c := condition(a, computev1alpha1.ConditionIgnitionReady); c == nil || a.Status.State != computev1alpha1.MachineStatePending {
					return fmt.Sprintf("status %+v", a.Status)
				}
				if a.After != 30*time.Second {
					return fmt.Sprintf("after %v; want StuckAfter without a failed read on record", a.After)
				}
				p.SecretUnreadSince = t0.Add(-2 * time.Second)
				if got := p.lookAgain(missingSecret); got != 2*time.Second {
					return fmt.Sprintf("unread for 2 s: look again after %v, want 2s", got)
				}
				return ""
			}},
		{name: "garbage goes first", m: machine(), rm: runtimeMachine(), garbage: []string{"old"}, want: "DeleteGarbage,WriteStatus"},
		{name: "settled and as asked: one status write, no Event", m: machine(), rm: runtimeMachine(), want: "WriteStatus",
			check: func(a Action, _ *Pass, evs []Event) string {
				if a.Status.State != computev1alpha1.MachineStateRunning || a.After != 0 || len(evs) != 0 {
					return fmt.Sprintf("state %s after %v events %+v", a.Status.State, a.After, evs)
				}
				return ""
			}},
		{name: "powered off by its user", m: machine(func(m *computev1alpha1.Machine) { m.Spec.Power = computev1alpha1.PowerOff }),
			rm: runtimeMachine(), sh: shell{}, want: "SetPower,Wait"},
		{name: "a power-off that settled: Shutdown and a PoweredOff Event", m: machine(func(m *computev1alpha1.Machine) { m.Spec.Power = computev1alpha1.PowerOff }),
			rm: runtimeMachine(), sh: shell{settles: true}, want: "SetPower,WriteStatus", check: func(a Action, _ *Pass, evs []Event) string {
				// The shell's answer keeps the state Running: the event follows the state.
				if len(evs) != 0 {
					return fmt.Sprintf("events %+v", evs)
				}
				return ""
			}},
		{name: "lagging, not yet stuck", m: machine(), rm: pending, lag: Lag{Since: t0.Add(-10 * time.Second)}, want: "Wait"},
		{name: "lagging past StuckAfter: the call is repeated", m: machine(), rm: pending, lag: Lag{Since: t0.Add(-31 * time.Second)},
			want: "SetPower,Wait", check: func(_ Action, p *Pass, _ []Event) string {
				if !p.Lag.Since.Equal(t0) {
					return fmt.Sprintf("lag since %v, want now (the wait starts again)", p.Lag.Since)
				}
				return ""
			}},
		{name: "a reboot asked", m: machine(func(m *computev1alpha1.Machine) {
			m.Annotations = map[string]string{computev1alpha1.AnnotationReboot: "t1"}
		}),
			rm: runtimeMachine(), sh: shell{settles: true}, want: "Reboot,WriteStatus"},
		{name: "a new image: reimaging, written, looked at again after StuckAfter",
			m: machine(func(m *computev1alpha1.Machine) { m.Spec.Image, m.Generation = "reg/img:2", 2 }), rm: runtimeMachine(), sh: shell{reimage: true},
			want: "Reimage,WriteStatus", check: func(a Action, _ *Pass, evs []Event) string {
				c := condition(a, computev1alpha1.ConditionReimaging)
				if c == nil || c.Status != metav1.ConditionTrue || a.After != 30*time.Second {
					return fmt.Sprintf("Reimaging %+v after %v", c, a.After)
				}
				if len(evs) != 1 || evs[0].Reason != computev1alpha1.ReasonReimaging {
					return fmt.Sprintf("events %+v", evs)
				}
				return ""
			}},
		{name: "a new image refused: a Warning, the machine keeps its image, its power still set",
			m: machine(func(m *computev1alpha1.Machine) {
				m.Spec.Image, m.Generation, m.Spec.Power = "reg/img:2", 2, computev1alpha1.PowerOff
			}), rm: runtimeMachine(), sh: shell{refuse: "no such image", settles: true},
			want: "Reimage,SetPower,WriteStatus", check: func(a Action, _ *Pass, evs []Event) string {
				c := condition(a, computev1alpha1.ConditionReimaging)
				if c == nil || c.Reason != computev1alpha1.ReasonReimageRefused || a.Status.Image.Reference != "reg/img:1" {
					return fmt.Sprintf("Reimaging %+v, image %+v", c, a.Status.Image)
				}
				if a.Status.ObservedGeneration == 2 {
					return "observedGeneration moved although the image was refused"
				}
				if len(evs) == 0 || !evs[0].Warning {
					return fmt.Sprintf("events %+v, want the Warning first", evs)
				}
				return ""
			}},
		{name: "a spec change with the same first-boot config says nothing",
			m: machine(func(m *computev1alpha1.Machine) { m.Generation = 2 }), rm: runtimeMachine(), sh: shell{boot: &mriv1alpha1.FirstBootConfig{}},
			want: "CheckFirstBoot,WriteStatus", check: func(a Action, _ *Pass, _ []Event) string {
				if c := condition(a, computev1alpha1.ConditionFirstBootUpToDate); c != nil {
					return fmt.Sprintf("FirstBootUpToDate %+v", c)
				}
				return ""
			}},
		{name: "a new first-boot config waits for the next reimage",
			m: machine(func(m *computev1alpha1.Machine) { m.Generation = 2 }), rm: runtimeMachine(),
			sh: shell{boot: &mriv1alpha1.FirstBootConfig{Data: []byte("new")}}, want: "CheckFirstBoot,WriteStatus",
			check: func(a Action, _ *Pass, _ []Event) string {
				c := condition(a, computev1alpha1.ConditionFirstBootUpToDate)
				if c == nil || c.Reason != computev1alpha1.ReasonAppliedAtNextReimage || a.After != 0 {
					return fmt.Sprintf("FirstBootUpToDate %+v after %v (no timed retry: nothing to fix)", c, a.After)
				}
				return ""
			}},
		{name: "deleted, the runtime still at it: Terminating", m: machine(deleting), rm: runtimeMachine(), sh: shell{still: runtimeMachine()},
			want: "DeleteRuntime,MarkTerminating", check: func(a Action, _ *Pass, _ []Event) string {
				if a.Status.State != computev1alpha1.MachineStateTerminating || a.After != 30*time.Second {
					return fmt.Sprintf("state %s after %v", a.Status.State, a.After)
				}
				return ""
			}},
		{name: "deleted, already Terminating: wait", m: machine(deleting, func(m *computev1alpha1.Machine) { m.Status.State = computev1alpha1.MachineStateTerminating }),
			rm: runtimeMachine(), sh: shell{still: runtimeMachine()}, want: "DeleteRuntime,Wait"},
		{name: "deleted, gone at once: the finalizer goes, with a Deleted Event", m: machine(deleting), rm: runtimeMachine(),
			want: "DeleteRuntime,RemoveFinalizer", check: func(a Action, _ *Pass, evs []Event) string {
				if len(evs) != 1 || evs[0].Reason != computev1alpha1.EventDeleted {
					return fmt.Sprintf("events %+v", evs)
				}
				return ""
			}},
		{name: "deleted before it ever had a machine: no Event", m: machine(deleting, fresh), want: "RemoveFinalizer",
			check: func(_ Action, _ *Pass, evs []Event) string {
				if len(evs) != 0 {
					return fmt.Sprintf("events %+v", evs)
				}
				return ""
			}},
		{name: "deleted without the finalizer: nothing holds it", m: machine(deleting, func(m *computev1alpha1.Machine) { m.Finalizers = nil }),
			want: "Wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPass(tc.m, tc.rm)
			p.Garbage, p.Lag = tc.garbage, tc.lag
			sh := tc.sh
			done := sh.run(t, p)
			if got := kinds(done); got != tc.want {
				t.Fatalf("actions %s, want %s", got, tc.want)
			}
			if tc.check != nil {
				if msg := tc.check(last(done), p, sh.events); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

func deleting(m *computev1alpha1.Machine) {
	now := metav1.NewTime(t0)
	m.DeletionTimestamp = &now
}

// Whatever the Machine and its runtime machine, and whatever the runtime answers, a pass
// ends; creates at most once, and only for a Machine without a runtime machine; deletes
// the Machine's own machine only when the Machine is being deleted; writes a status that
// claims no image the runtime did not report, with a reason on every condition; and asks
// for nothing unknown.
func TestPassProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := machine()
		if rapid.Bool().Draw(t, "fresh") {
			m.Status = computev1alpha1.MachineStatus{}
		}
		m.Generation = rapid.Int64Range(1, 3).Draw(t, "generation")
		m.Spec.Image = rapid.SampledFrom([]string{"reg/img:1", "reg/img:2"}).Draw(t, "image")
		m.Spec.Power = rapid.SampledFrom([]computev1alpha1.Power{"", computev1alpha1.PowerOn, computev1alpha1.PowerOff}).Draw(t, "power")
		m.Spec.ImageUpdatePolicy = rapid.SampledFrom([]computev1alpha1.ImageUpdatePolicy{"", computev1alpha1.ImageUpdatePolicyNever}).Draw(t, "policy")
		if rapid.Bool().Draw(t, "reboot") {
			m.Annotations = map[string]string{computev1alpha1.AnnotationReboot: "t1"}
		}
		if rapid.Bool().Draw(t, "pinned") {
			m.Finalizers = nil
		}
		if rapid.Bool().Draw(t, "deleting") {
			deleting(m)
		}
		rm := func(label string) *mriv1alpha1.Machine {
			if !rapid.Bool().Draw(t, label) {
				return nil
			}
			return runtimeMachine(func(rm *mriv1alpha1.Machine) {
				rm.Metadata.Generation = rapid.Int64Range(1, 3).Draw(t, label+" generation")
				rm.Status.ObservedGeneration = rapid.Int64Range(0, rm.Metadata.Generation).Draw(t, label+" observed")
				rm.Spec.Power = rapid.SampledFrom([]mriv1alpha1.Power{mriv1alpha1.Power_POWER_ON, mriv1alpha1.Power_POWER_OFF}).Draw(t, label+" power")
				rm.Spec.Image.Reference = rapid.SampledFrom([]string{"reg/img:1", "reg/img:2"}).Draw(t, label+" image")
				rm.Status.State = rapid.SampledFrom([]mriv1alpha1.MachineState{mriv1alpha1.MachineState_MACHINE_STATE_PENDING,
					mriv1alpha1.MachineState_MACHINE_STATE_RUNNING, mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN,
					mriv1alpha1.MachineState_MACHINE_STATE_TERMINATED}).Draw(t, label+" state")
			})
		}
		start := rm("runtime machine")
		p := newPass(m, start)
		p.Lag = Lag{Since: t0.Add(-time.Duration(rapid.IntRange(0, 60).Draw(t, "lagging for")) * time.Second)}
		sh := shell{created: rm("created"), reimage: rapid.Bool().Draw(t, "reimage starts"), settles: rapid.Bool().Draw(t, "settles"),
			still: rm("still"), refuse: rapid.SampledFrom([]string{"", "no room"}).Draw(t, "refuse")}
		if rapid.Bool().Draw(t, "boot readable") {
			sh.boot = &mriv1alpha1.FirstBootConfig{Data: []byte(rapid.SampledFrom([]string{"", "new"}).Draw(t, "boot"))}
		}
		reported := m.Status.Image
		var seen []*mriv1alpha1.Machine // every runtime machine the pass saw
		if start != nil {
			seen = append(seen, start)
		}
		var done []Action
		for range 20 {
			a := p.Next()
			done = append(done, a)
			switch a.Kind {
			case KindInvalid:
				t.Fatalf("an invalid action after %s", kinds(done))
			case Create:
				if start != nil || slices.ContainsFunc(done[:len(done)-1], func(a Action) bool { return a.Kind == Create }) {
					t.Fatalf("created for a Machine that had a machine, or twice: %s", kinds(done))
				}
			case DeleteRuntime:
				if m.DeletionTimestamp.IsZero() {
					t.Fatalf("deleted the machine of a Machine that is not being deleted: %s", kinds(done))
				}
			case DeleteGarbage:
				t.Fatalf("garbage deleted, none given: %s", kinds(done))
			case AddFinalizer, RemoveFinalizer:
				if (a.Kind == RemoveFinalizer) == m.DeletionTimestamp.IsZero() {
					t.Fatalf("%s on a Machine deleting=%v", kindName[a.Kind], !m.DeletionTimestamp.IsZero())
				}
			}
			if a.Status != nil {
				if img := a.Status.Image; img != nil && (reported == nil || *img != *reported) && !slices.ContainsFunc(seen, func(rm *mriv1alpha1.Machine) bool {
					return rm.GetSpec().GetImage().GetReference() == img.Reference && rm.GetSpec().GetImage().GetDigest() == img.Digest
				}) {
					t.Fatalf("status claims image %+v, which no runtime machine reported", img)
				}
				for _, c := range a.Status.Conditions {
					if c.Reason == "" {
						t.Fatalf("condition %s without a reason", c.Type)
					}
				}
			}
			if a.Ends() {
				return
			}
			before := p.Runtime
			sh.apply(p, a)
			if p.Runtime != before && p.Runtime != nil {
				seen = append(seen, p.Runtime)
			}
		}
		t.Fatalf("the pass did not end: %s", kinds(done))
	})
}

// apply answers one action the way the shell says.
func (s *shell) apply(p *Pass, a Action) {
	switch a.Kind {
	case Create:
		switch {
		case s.refuse != "":
			p.Refused(s.refuse)
		case s.created == nil:
			p.Problem(missingSecret)
		default:
			s.events = append(s.events, p.Created(s.created)...)
		}
	case Reimage:
		tg := TargetOf(p.Machine, p.Runtime)
		switch {
		case s.refuse != "":
			s.events = append(s.events, p.RefusedReimage(tg, s.refuse)...)
		case !s.reimage:
			p.Problem(missingSecret)
		default:
			answer := clone(p.Runtime)
			answer.Metadata.Generation++
			s.events = append(s.events, p.Reimaging(tg, answer)...)
		}
	case CheckFirstBoot:
		if s.boot == nil {
			p.Problem(missingSecret)
		} else {
			p.FirstBoot(s.boot)
		}
	case SetPower, Reboot:
		answer := clone(p.Runtime)
		answer.Metadata.Generation++
		if a.Kind == SetPower {
			answer.Spec.Power = a.Power
		} else {
			answer.Status.RebootToken = a.Token
		}
		if s.settles {
			answer.Status.ObservedGeneration = answer.Metadata.Generation
		}
		p.Answered(answer)
	case DeleteRuntime:
		p.Deleted(Sorted{Mine: s.still})
	}
}
