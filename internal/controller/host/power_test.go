package host

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
	"github.com/anvil-dev/anvil/internal/controller/host/imagecheck"
	"github.com/anvil-dev/anvil/internal/events"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

const bmcPassword = "hunter22-bmc"

// powerBMC is a provisioner with one deployed server whose power changes end as the test
// says. Like Ironic, an accepted change is under way (busy) until the next look, and a
// failed one leaves the power as it was and says why in last_error, here with the BMC's
// address and password in it, as a careless driver's message might.
type powerBMC struct {
	provisioner.Provisioner // every other call: not expected
	mu                      sync.Mutex
	node                    provisioner.Node
	fail                    bool
	calls                   []time.Time
	clock                   *clocktesting.FakePassiveClock
}

func (b *powerBMC) Register(_ context.Context, r provisioner.Registration) (provisioner.Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.Password != bmcPassword {
		return provisioner.Node{}, fmt.Errorf("registered with password %q", r.Password)
	}
	return b.node, nil
}

func (b *powerBMC) Get(context.Context, string) (provisioner.Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node.Busy { // the change asked for ends now
		b.node.Busy = false
		if b.fail {
			b.node.LastError = "Failed to change power state to 'power on' by 'power on'. Error: redfish://admin:" + bmcPassword +
				"@10.0.0.5/redfish/v1/Systems/1 answered 500 (password=" + bmcPassword + ")"
		} else {
			b.node.PowerOn = ptr(true)
		}
	}
	return b.node, nil
}

func (b *powerBMC) Power(_ context.Context, _ string, on bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !on {
		return fmt.Errorf("asked to power off")
	}
	b.calls = append(b.calls, b.clock.Now())
	b.node.Busy, b.node.LastError = true, "" // Ironic clears last_error as a change starts
	return nil
}

func (b *powerBMC) callTimes() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.calls...)
}

func ptr[T any](v T) *T { return &v }

// eventLog keeps the Events a Recorder writes.
type eventLog struct {
	mu     sync.Mutex
	events []string // "type reason: note"
}

func (l *eventLog) Eventf(_, _ runtime.Object, typ, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, typ+" "+reason+": "+fmt.Sprintf(note, args...))
}

func (l *eventLog) of(reason string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if strings.Contains(e, " "+reason+": ") {
			out = append(out, e)
		}
	}
	return out
}

// TestPowerFailureIsReportedAndBackedOff is a server whose power-on Ironic keeps
// failing: anvil asked again at every poll (52 times in 100 s) and said nothing. Now the
// Host reports the failure (Error, Ready PowerChangeFailed, lastError, a Warning Event, no
// password anywhere), asks again only after a back-off that grows to its cap, keeps that
// back-off across a restart of the controller, and forgets it once the power comes on.
func TestPowerFailureIsReportedAndBackedOff(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "power-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	img := &metalv1alpha1.HostImage{URL: "http://127.0.0.1:1/disk.raw", Checksum: "sha256:" + strings.Repeat("a", 64), Format: metalv1alpha1.ImageFormatRaw}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "bmc"},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte(bmcPassword)}}
	h := &metalv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "server-1"},
		Spec: metalv1alpha1.HostSpec{
			BMC:            metalv1alpha1.BMC{Address: "redfish://10.0.0.5/redfish/v1/Systems/1", CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: "bmc"}},
			BootMACAddress: "52:54:00:12:34:56", Architecture: computev1alpha1.ArchitectureAMD64, Online: true, Image: img,
		},
	}
	for _, o := range []client.Object{secret, h} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	bmc := &powerBMC{clock: clock, fail: true, node: provisioner.Node{Name: nodeName(h), ID: "uuid-1", State: provisioner.StateActive,
		PowerOn: ptr(false), Image: hostplan.ImageOf(img)}}
	log := &eventLog{}
	newReconciler := func() *Reconciler {
		return &Reconciler{Client: env.Client, Provisioner: bmc, Images: &imagecheck.Checker{}, Clock: clock,
			Events: events.New(log, events.NewLimit(1000, 1000))}
	}
	r := newReconciler()
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(h)}
	// run reconciles as the controller's queue would, each when the last asked, for d.
	run := func(d time.Duration) {
		t.Helper()
		for end := clock.Now().Add(d); clock.Now().Before(end); {
			res, err := r.Reconcile(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.RequeueAfter <= 0 {
				t.Fatalf("at %s: the Host is not looked at again (%+v)", clock.Now(), res)
			}
			clock.SetTime(clock.Now().Add(res.RequeueAfter))
		}
	}
	get := func() *metalv1alpha1.Host {
		t.Helper()
		got := &metalv1alpha1.Host{}
		if err := env.Client.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	start := clock.Now()
	run(100 * time.Second)
	calls := bmc.callTimes()
	// 0, then the failure seen 2 s later, and asked again 5, 10, 20, 40 s after failures.
	if len(calls) > 6 {
		t.Fatalf("the provisioner was asked to power on %d times in 100 s (at %v); want a back-off", len(calls), offsets(start, calls))
	}
	for i := 2; i < len(calls); i++ {
		if gap, last := calls[i].Sub(calls[i-1]), calls[i-1].Sub(calls[i-2]); gap < last {
			t.Fatalf("the wait shrank: asked at %v", offsets(start, calls))
		}
	}
	got := get()
	ready := meta.FindStatusCondition(got.Status.Conditions, metalv1alpha1.ConditionReady)
	if got.Status.OperationalStatus != metalv1alpha1.OperationalError || ready == nil || ready.Status != metav1.ConditionFalse ||
		ready.Reason != metalv1alpha1.ReasonPowerChangeFailed || got.Status.PowerState != metalv1alpha1.PowerOff {
		t.Fatalf("status %s, power %s, Ready %+v: want Error, Off and Ready False PowerChangeFailed", got.Status.OperationalStatus, got.Status.PowerState, ready)
	}
	if !strings.Contains(got.Status.LastError, "Failed to change power state to 'power on'") || ready.Message != got.Status.LastError {
		t.Fatalf("lastError %q, Ready's message %q: want Ironic's message in both", got.Status.LastError, ready.Message)
	}
	pc := got.Status.PowerChange
	if pc == nil || pc.Target != metalv1alpha1.PowerOn || pc.Failures < 4 || pc.LastFailureAt == nil {
		t.Fatalf("powerChange %+v: want the failures counted", pc)
	}
	warnings := log.of(metalv1alpha1.ReasonPowerChangeFailed)
	if len(warnings) != int(pc.Failures) || !strings.HasPrefix(warnings[0], corev1.EventTypeWarning) {
		t.Fatalf("events %v: want one Warning per failure (%d)", log.events, pc.Failures)
	}
	for _, text := range append([]string{got.Status.LastError, ready.Message}, log.events...) {
		if strings.Contains(text, bmcPassword) || strings.Contains(text, "admin:") {
			t.Fatalf("a BMC credential is shown: %q", text)
		}
	}

	// A controller restarted a second after the last failure keeps the back-off: nothing
	// is asked before it ends.
	r = newReconciler()
	clock.SetTime(pc.LastFailureAt.Add(time.Second))
	wait := hostplan.PowerRetryAt(pc, hostplan.DefaultMaxBackoff).Sub(clock.Now())
	asked := len(bmc.callTimes())
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(bmc.callTimes()) != asked || res.RequeueAfter != wait {
		t.Fatalf("after a restart: asked %d times more, looking again after %s; want none and %s", len(bmc.callTimes())-asked, res.RequeueAfter, wait)
	}

	// The BMC is fixed: the next attempt works, and the failure is forgotten.
	bmc.mu.Lock()
	bmc.fail = false
	bmc.mu.Unlock()
	clock.SetTime(clock.Now().Add(wait))
	run(5 * time.Second)
	got = get()
	ready = meta.FindStatusCondition(got.Status.Conditions, metalv1alpha1.ConditionReady)
	if got.Status.PowerChange != nil || got.Status.OperationalStatus != metalv1alpha1.OperationalOK || got.Status.LastError != "" ||
		got.Status.PowerState != metalv1alpha1.PowerOn || ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("after the power came on: powerChange %+v, status %s, lastError %q, power %s, Ready %+v",
			got.Status.PowerChange, got.Status.OperationalStatus, got.Status.LastError, got.Status.PowerState, ready)
	}
	if len(log.of("PowerRestored")) != 1 {
		t.Fatalf("events %v: want one PowerRestored", log.events)
	}
}

func offsets(start time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(start)
	}
	return out
}
