package metal

import (
	"context"
	"fmt"
	"os"
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
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/test/diskimage"
	"github.com/anvil-dev/anvil/test/ironictest"
)

// newNamespace creates a namespace unique to the test.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// shared is the Ironic of the tests whose sites merely need one, each leaving it without
// nodes; TestMain stops it. A test's site starts its own (startSiteOwnIronic) when its
// subject is Ironic:
//   - TestIronicLosesItsDatabase and TestIronicLosesItsDatabaseInEveryState kill it and
//     delete its database (the latter with Ironic's own deploy limit and slow fake
//     hardware, to lose it in every state);
//   - TestFiftyHostsAgainstTheDeployLimit needs Ironic's own deploy limit and slow fake
//     hardware.
//
// The metal pools (startMetalPool) start their own too: most of their tests take Ironic's
// database away, and the pools' Ironic builds UEFI boot ISOs around an ESP image.
var shared ironictest.Shared

// startSite starts the Host controller for namespace ns on the shared Ironic; mod adjusts
// the site's configuration.
func startSite(t *testing.T, ns string, mod func(*site.Config)) *site.Site {
	t.Helper()
	irc := shared.Ironic(t)
	return runSite(t, ns, func(c *site.Config) {
		c.Ironic = irc
		if mod != nil {
			mod(c)
		}
	})
}

// startSiteOwnIronic starts a site with an Ironic of its own, for a test about Ironic
// (see shared).
func startSiteOwnIronic(t *testing.T, ns string, mod func(*site.Config)) *site.Site {
	t.Helper()
	s := runSite(t, ns, mod)
	ironictest.LogOnFailure(t, s.Ironic)
	return s
}

// runSite starts a site for namespace ns, stopped when the test ends. Its state (Ironic's,
// when the site starts one) lives in a short temporary folder (its paths end up in
// socket-free files only, but short paths keep Ironic's log lines readable).
func runSite(t *testing.T, ns string, mod func(*site.Config)) *site.Site {
	t.Helper()
	dir, err := os.MkdirTemp("", "anvil-site-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// Fake hardware has no disks to wipe (the Host controller never wipes it).
	cfg := site.Config{RestConfig: env.Config, Namespace: ns, StateDir: dir, BusyPoll: 500 * time.Millisecond,
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

// serveDisk serves a raw disk image until the test ends.
func serveDisk(t *testing.T) *diskimage.Server {
	t.Helper()
	d := diskimage.Serve()
	t.Cleanup(d.Close)
	return d
}

// fakeHost is a Host on Ironic's fake hardware.
func fakeHost(ns, name string, i int) *metalv1alpha1.Host {
	return &metalv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"rack": "r1"}},
		Spec: metalv1alpha1.HostSpec{
			BMC:            metalv1alpha1.BMC{Address: "fake://" + name + "?cpus=8&memory_mb=16384&local_gb=100"},
			BootMACAddress: fmt.Sprintf("52:54:00:%02x:%02x:%02x", (i>>16)&0xff, (i>>8)&0xff, i&0xff),
			Architecture:   computev1alpha1.ArchitectureAMD64,
		},
	}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// update changes a Host with f, retrying on conflicts.
func update(t *testing.T, ns, name string, f func(*metalv1alpha1.Host)) {
	t.Helper()
	changeHost(t, ns, name, "updating", func(ctx context.Context, h *metalv1alpha1.Host) error {
		f(h)
		return env.Client.Update(ctx, h)
	})
}

// changeHost writes the Host with write, read afresh and retried on conflicts.
func changeHost(t *testing.T, ns, name, what string, write func(context.Context, *metalv1alpha1.Host) error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		h := &metalv1alpha1.Host{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
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

// waitHost waits until cond holds for the Host, failing with its last status.
func waitHost(t *testing.T, ns, name, what string, timeout time.Duration, cond func(*metalv1alpha1.Host) bool) *metalv1alpha1.Host {
	t.Helper()
	h := &metalv1alpha1.Host{}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cond(h), nil
	})
	if err != nil {
		t.Fatalf("Host %s never became %s; status: %s", name, what, describe(h))
	}
	return h
}

func describe(h *metalv1alpha1.Host) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%s op=%s power=%s err=%q", h.Status.ProvisioningState, h.Status.OperationalStatus, h.Status.PowerState, h.Status.LastError)
	for _, c := range h.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func inState(s metalv1alpha1.ProvisioningState) func(*metalv1alpha1.Host) bool {
	return func(h *metalv1alpha1.Host) bool {
		return h.Status.ProvisioningState == s && h.Status.OperationalStatus == metalv1alpha1.OperationalOK
	}
}

func provisioned(h *metalv1alpha1.Host) bool {
	return inState(metalv1alpha1.StateProvisioned)(h) && h.Status.Image != nil
}

func condition(h *metalv1alpha1.Host, t string) *metav1.Condition {
	for i := range h.Status.Conditions {
		if h.Status.Conditions[i].Type == t {
			return &h.Status.Conditions[i]
		}
	}
	return nil
}

// failedWith is a Host in error whose Ready condition has the reason.
func failedWith(reason string) func(*metalv1alpha1.Host) bool {
	return func(h *metalv1alpha1.Host) bool {
		c := condition(h, metalv1alpha1.ConditionReady)
		return h.Status.OperationalStatus == metalv1alpha1.OperationalError && c != nil && c.Reason == reason && h.Status.LastError != ""
	}
}
