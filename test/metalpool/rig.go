package metalpool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/controller/host/hostplan"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/ironictest"
	"github.com/anvil-dev/anvil/test/testos"
)

// Rig is what the test packages of the bare-metal half share: test/metal (fake hardware)
// and test/metalservers (emulated servers) start sites, pools and anvil's manager against
// their package's control plane, and wait for and check Hosts and Machines the same way.
// A package keeps one Rig; its TestMain sets Env (harness.Main) and stops Shared after
// the tests.
type Rig struct {
	Env *harness.Env
	// Shared is the Ironic of the tests whose sites merely need one, each leaving it
	// without nodes. A test's site starts its own (StartSiteOwnIronic) when its subject is
	// Ironic (it kills it, deletes its database, or needs Ironic's own deploy limit and slow
	// fake hardware); the pools (StartPool) start their own too: most of their tests take
	// Ironic's database away, and the pools' Ironic builds UEFI boot ISOs around an ESP image.
	Shared ironictest.Shared
}

// NewNamespace creates a namespace unique to the test.
func (r *Rig) NewNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := r.Env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// Create creates the objects as the admin.
func (r *Rig) Create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := r.Env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// StartSite starts the Host controller for namespace ns on the shared Ironic; mod adjusts
// the site's configuration.
func (r *Rig) StartSite(t *testing.T, ns string, mod func(*site.Config)) *site.Site {
	t.Helper()
	irc := r.Shared.Ironic(t)
	return r.runSite(t, ns, func(c *site.Config) {
		c.Ironic = irc
		if mod != nil {
			mod(c)
		}
	})
}

// StartSiteOwnIronic starts a site with an Ironic of its own, for a test about Ironic
// (see Shared).
func (r *Rig) StartSiteOwnIronic(t *testing.T, ns string, mod func(*site.Config)) *site.Site {
	t.Helper()
	s := r.runSite(t, ns, mod)
	ironictest.LogOnFailure(t, s.Ironic)
	return s
}

// runSite starts a site for namespace ns, stopped when the test ends. Its state (Ironic's,
// when the site starts one) lives in a short temporary folder (its paths end up in
// socket-free files only, but short paths keep Ironic's log lines readable).
func (r *Rig) runSite(t *testing.T, ns string, mod func(*site.Config)) *site.Site {
	t.Helper()
	dir, err := os.MkdirTemp("", "anvil-site-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// Fake hardware has no disks to wipe (the Host controller never wipes it).
	cfg := site.Config{RestConfig: r.Env.Config, Namespace: ns, StateDir: dir, BusyPoll: 500 * time.Millisecond,
		Wipe: site.Wipe{Method: site.WipeNone}, Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 0})}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting the site: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartManager runs anvil's manager (scheduler and the rest) for the test.
func (r *Rig) StartManager(t *testing.T) {
	t.Helper()
	o := manager.DefaultOptions()
	o.AllowRegistry = []string{r.Env.Registry.Host} // the test's registry, on loopback
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	mgr, err := manager.New(r.Env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// StartPool runs a bare-metal pool for the Hosts of ns until the test ends: Ironic, the
// Host controller, the metal runtime behind a real socket, and the pool's poollet; the
// site wipes released servers with anvil's eraser. mod, when set, changes the site's
// configuration.
func (r *Rig) StartPool(t *testing.T, name, ns string, mod func(*site.Config)) *pool.Pool {
	t.Helper()
	dir, err := os.MkdirTemp("", "anvil-pool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc := site.Config{RestConfig: r.Env.Config, Namespace: ns, StateDir: dir, BusyPoll: 500 * time.Millisecond,
		ESPImage: testos.ESPImage(t), Wipe: site.Wipe{Method: site.WipeEraser, EraserDir: testos.EraserDir(t)}}
	if mod != nil {
		mod(&sc)
	}
	p, err := Start(ctx, r.Env.Config, r.Env.Client, pool.Config{
		Site: sc,
		Name: name, ImageCacheDir: filepath.Join(dir, "cache"), ImageCache: osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}},
		ConsoleDir: filepath.Join(dir, "consoles"),
	}, 2*time.Second)
	if err != nil {
		t.Fatalf("starting the metal pool: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping the pool: %v", err)
		}
		if t.Failed() {
			var hosts metalv1alpha1.HostList
			_ = r.Env.Client.List(context.Background(), &hosts, client.InNamespace(ns))
			for i := range hosts.Items {
				t.Logf("Host %s: %s", hosts.Items[i].Name, Describe(&hosts.Items[i]))
			}
			if b, err := os.ReadFile(p.Site.Ironic.LogPath()); err == nil {
				t.Logf("ironic.log (tail):\n%s", devproc.LastLines(string(b), 40))
			}
		}
	})
	return p.Pool
}

// ChangeHost writes the Host with write, read afresh and retried on conflicts.
func (r *Rig) ChangeHost(t *testing.T, ns, name, what string, write func(context.Context, *metalv1alpha1.Host) error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		h := &metalv1alpha1.Host{}
		if err := r.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
			return false, err
		}
		err := write(ctx, h)
		if err != nil && strings.Contains(err.Error(), "the object has been modified") {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("%s Host %s: %v", what, name, err)
	}
}

// ClearStatus writes an empty status to the Host through the status subresource, as a
// restore from a backup without status leaves it.
func (r *Rig) ClearStatus(t *testing.T, ns, name string) {
	t.Helper()
	r.ChangeHost(t, ns, name, "clearing the status of", func(ctx context.Context, h *metalv1alpha1.Host) error {
		h.Status = metalv1alpha1.HostStatus{}
		return r.Env.Client.Status().Update(ctx, h)
	})
}

// WaitHost waits until cond holds for the Host, failing with its last status.
func (r *Rig) WaitHost(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*metalv1alpha1.Host) bool) *metalv1alpha1.Host {
	t.Helper()
	h := &metalv1alpha1.Host{}
	if err := r.poll(h, ns, name, 200*time.Millisecond, timeout, func() bool { return cond(h) }); err != nil {
		t.Fatalf("Host %s never became %s; status: %s", name, what, Describe(h))
	}
	return h
}

// poll reads the object ns/name into obj every interval until done holds (a missing
// object is waited for), or fails after timeout.
func (r *Rig) poll(obj client.Object, ns, name string, interval, timeout time.Duration, done func() bool) error {
	return wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := r.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return done(), nil
	})
}

// CheckClaims fails unless no consumer holds two Hosts and every Host's deployment record
// is its consumer's or released; with machines (uid -> exists), every Host's consumer is
// a Machine that exists.
func (r *Rig) CheckClaims(t *testing.T, ns string, machines map[string]bool) {
	t.Helper()
	var hosts metalv1alpha1.HostList
	if err := r.Env.Client.List(context.Background(), &hosts, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for i := range hosts.Items {
		h := &hosts.Items[i]
		rec, err := hostplan.RecordOf(h)
		if err != nil {
			t.Errorf("Host %s: %v", h.Name, err)
		}
		c := h.Spec.ConsumerRef
		if c == nil {
			if rec != nil && !rec.Released {
				t.Errorf("Host %s has no consumer and a deployment record of %s not released", h.Name, rec.Consumer)
			}
			continue
		}
		if other, ok := held[c.UID]; ok {
			t.Errorf("consumer %s/%s (%s) holds Hosts %s and %s", c.Namespace, c.Name, c.UID, other, h.Name)
		}
		held[c.UID] = h.Name
		if rec != nil && !rec.Released && rec.Consumer != c.UID {
			t.Errorf("Host %s is held by %s and records a deployment for %s", h.Name, c.UID, rec.Consumer)
		}
		if machines != nil && !machines[c.UID] {
			t.Errorf("Host %s is held by %s/%s (%s), which does not exist", h.Name, c.Namespace, c.Name, c.UID)
		}
	}
}

// MachineState waits until cond holds for the Machine, failing with its last state and
// conditions.
func (r *Rig) MachineState(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*computev1alpha1.Machine) bool) *computev1alpha1.Machine {
	t.Helper()
	m := &computev1alpha1.Machine{}
	if err := r.poll(m, ns, name, 250*time.Millisecond, timeout, func() bool { return cond(m) }); err != nil {
		var conds []string
		for _, c := range m.Status.Conditions {
			conds = append(conds, fmt.Sprintf("[%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message))
		}
		t.Fatalf("Machine %s/%s never %s; state %s %s", ns, name, what, m.Status.State, strings.Join(conds, " "))
	}
	return m
}

// SetPower sets the Machine's power.
func (r *Rig) SetPower(t *testing.T, ns, name string, p computev1alpha1.Power) {
	t.Helper()
	m := &computev1alpha1.Machine{}
	if err := r.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Power = p
	if err := r.Env.Client.Patch(context.Background(), m, patch); err != nil {
		t.Fatal(err)
	}
}

// Describe is the Host's state, power, last error and conditions, for failure messages.
func Describe(h *metalv1alpha1.Host) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s op=%s power=%s err=%q", h.Status.ProvisioningState, h.Status.OperationalStatus, h.Status.PowerState, h.Status.LastError)
	for _, c := range h.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// InState is a Host in provisioning state s with nothing wrong.
func InState(s metalv1alpha1.ProvisioningState) func(*metalv1alpha1.Host) bool {
	return func(h *metalv1alpha1.Host) bool {
		return h.Status.ProvisioningState == s && h.Status.OperationalStatus == metalv1alpha1.OperationalOK
	}
}

// Provisioned is a Host provisioned with an image, with nothing wrong.
func Provisioned(h *metalv1alpha1.Host) bool {
	return InState(metalv1alpha1.StateProvisioned)(h) && h.Status.Image != nil
}

// Condition is the Host's condition of type t, or nil.
func Condition(h *metalv1alpha1.Host, t string) *metav1.Condition {
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == t {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// FailedWith is a Host in error whose Ready condition has the reason.
func FailedWith(reason string) func(*metalv1alpha1.Host) bool {
	return func(h *metalv1alpha1.Host) bool {
		c := Condition(h, metalv1alpha1.ConditionReady)
		return h.Status.OperationalStatus == metalv1alpha1.OperationalError && c != nil && c.Reason == reason && h.Status.LastError != ""
	}
}
