package ironic

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
)

// 20 nodes provisioned at once through a queue of 5, against an Ironic that itself
// refuses a 6th deploy: all become active, none fails, and the queue, not Ironic, holds
// the rest back. (Four times the limit, as 50 at 10 was, at under half the Ironic work.)
func TestTwentyNodesAtLimitFive(t *testing.T) {
	const nodes, limit = 20, 5
	irc := ironictest.Start(t, func(c *ironic.Config) {
		c.MaxConcurrentDeploy = limit
		// Deploys long enough to overlap, as real ones do.
		c.FakeDelays = ironic.FakeDelays{Deploy: ironic.Delay{Min: 2, Max: 4}}
	})
	wake := sync.Map{} // name -> chan struct{}
	p, _ := newProvisioner(t, irc, func(o *Options) {
		o.MaxConcurrentDeploy = limit
		o.OnSlotFree = func(name string) {
			if c, ok := wake.Load(name); ok {
				select {
				case c.(chan struct{}) <- struct{}{}:
				default:
				}
			}
		}
	})
	ctx := context.Background()
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("load~host-%02d", i)
		wake.Store(names[i], make(chan struct{}, 1))
	}
	start := time.Now()
	parallel(t, names, 8, func(name string) error {
		if _, err := p.Register(ctx, fakeHost(name)); err != nil {
			return err
		}
		if _, err := pollFor(p, name, time.Minute, "manageable", idleIn(provisioner.StateManageable)); err != nil {
			return err
		}
		if err := untilNotBusy(func() error { return p.Provide(ctx, name) }); err != nil {
			return err
		}
		_, err := pollFor(p, name, time.Minute, "available", idleIn(provisioner.StateAvailable))
		return err
	})
	t.Logf("%d nodes registered and available in %s", nodes, time.Since(start).Round(time.Millisecond))

	// Watch Ironic's own count of deploying nodes.
	var maxDeploying atomic.Int32
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			n := 0
			for _, st := range []string{"deploying", "wait%20call-back"} {
				var list struct {
					Nodes []struct{} `json:"nodes"`
				}
				if _, err := p.sc.Get(ctx, p.sc.ServiceURL("nodes")+"?fields=name&provision_state="+st, &list, nil); err == nil {
					n += len(list.Nodes)
				}
			}
			if int32(n) > maxDeploying.Load() {
				maxDeploying.Store(int32(n))
			}
		}
	}()

	var busy, unavailable atomic.Int32
	var deployTime atomic.Int64
	start = time.Now()
	d := provisioner.Deployment{Image: testImage, ConfigDrive: &provisioner.ConfigDrive{UserData: []byte("#cloud-config\n")}}
	parallel(t, names, nodes, func(name string) error {
		c, _ := wake.Load(name)
		for {
			err := p.Provision(ctx, name, d)
			switch {
			case err == nil:
			case errors.Is(err, provisioner.ErrBusy):
				busy.Add(1)
				select { // as the Host controller: woken by OnSlotFree, or requeued later
				case <-c.(chan struct{}):
				case <-time.After(5 * time.Second):
				}
				continue
			case errors.Is(err, provisioner.ErrUnavailable):
				unavailable.Add(1)
				time.Sleep(time.Second)
				continue
			default:
				return err
			}
			break
		}
		accepted := time.Now()
		n, err := pollFor(p, name, 3*time.Minute, "active", func(n provisioner.Node) bool {
			return (n.State == provisioner.StateActive || n.State == provisioner.StateFailed) && !n.Busy
		})
		if err != nil {
			return err
		}
		deployTime.Add(int64(time.Since(accepted)))
		if n.State != provisioner.StateActive {
			return fmt.Errorf("node %s failed: %s", name, n.LastError)
		}
		return nil
	})
	close(stop)
	<-watched
	t.Logf("%d nodes active in %s at limit %d (one deploy %s on average); %d ErrBusy answers, %d ErrUnavailable; at most %d deploying in Ironic",
		nodes, time.Since(start).Round(time.Millisecond), limit, (time.Duration(deployTime.Load()) / nodes).Round(time.Millisecond),
		busy.Load(), unavailable.Load(), maxDeploying.Load())
	if maxDeploying.Load() > limit {
		t.Errorf("Ironic saw %d nodes deploying at once, limit %d", maxDeploying.Load(), limit)
	}
	if unavailable.Load() > 0 {
		t.Errorf("%d ErrUnavailable reached the caller", unavailable.Load())
	}
	if in, waiting := p.deploys.counts(); in != 0 || waiting != 0 {
		t.Errorf("after all deploys: %d slots held, %d waiting", in, waiting)
	}
}

// parallel runs f for each name with at most width at once.
func parallel(t *testing.T, names []string, width int, f func(string) error) {
	t.Helper()
	sem := make(chan struct{}, width)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(n); err != nil {
				errs <- fmt.Errorf("%s: %w", n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
