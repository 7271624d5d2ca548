package ironic

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
)

// A deployment's Starting hook runs once a deployment is about to start, never while it
// waits for a slot nor for a deployment made already; its error abandons the call and
// frees the slot, with nothing asked of Ironic. The Host controller writes its durable
// record there, so a deployment that waited for a slot is never taken as started.
func TestStartingHookRunsOnlyWhenTheDeploymentStarts(t *testing.T) {
	irc := ironictest.Start(t, func(c *ironic.Config) {
		c.MaxConcurrentDeploy = 1
		c.FakeDelays = ironic.FakeDelays{Deploy: ironic.Delay{Min: 3}}
	})
	p, _ := newProvisioner(t, irc, func(o *Options) { o.MaxConcurrentDeploy = 1 })
	ctx := context.Background()
	a, b := "ns~start-a", "ns~start-b"
	availableNodes(t, p, a, b)
	var starts = map[string]*atomic.Int32{a: {}, b: {}}
	counted := func(name string) provisioner.Deployment {
		return provisioner.Deployment{Image: testImage, Starting: func(context.Context) error { starts[name].Add(1); return nil }}
	}

	refused := errors.New("the record could not be written")
	d := provisioner.Deployment{Image: testImage, Starting: func(context.Context) error { return refused }}
	if err := p.Provision(ctx, a, d); !errors.Is(err, refused) {
		t.Fatalf("Provision with a failing Starting: %v, want its error", err)
	}
	if n, err := p.Get(ctx, a); err != nil || n.State != provisioner.StateAvailable || n.Busy {
		t.Fatalf("after a failed Starting the node is %+v (%v), want Available and untouched", n, err)
	}
	// The slot was freed: b takes it.
	if err := p.Provision(ctx, b, counted(b)); err != nil {
		t.Fatalf("Provision of b after a's Starting failed: %v (a's slot kept?)", err)
	}
	// a waits for b's slot: Starting is not called.
	if err := p.Provision(ctx, a, counted(a)); !errors.Is(err, provisioner.ErrBusy) {
		t.Fatalf("Provision of a while b deploys: %v, want ErrBusy", err)
	}
	if got := starts[a].Load(); got != 0 {
		t.Fatalf("Starting ran %d times for a deployment waiting for a slot", got)
	}
	// b under way or done: asking again starts nothing.
	if err := p.Provision(ctx, b, counted(b)); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, b, provisioner.StateActive)
	retryBusy(t, "Provision a", func() error { return p.Provision(ctx, a, counted(a)) })
	waitState(t, p, a, provisioner.StateActive)
	if err := p.Provision(ctx, a, counted(a)); err != nil {
		t.Fatal(err)
	}
	if sa, sb := starts[a].Load(), starts[b].Load(); sa != 1 || sb != 1 {
		t.Errorf("Starting ran %d times for a and %d for b, want once each", sa, sb)
	}
}
