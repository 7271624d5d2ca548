package metal

import (
	"context"
	"maps"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

// countingProvisioner counts the deployments and adoptions a real provisioner is asked
// for, so a test can tell adoption from re-imaging: started counts the deployments of a
// consumer's image (provisions and rebuilds: those with a Starting hook, which writes the
// Host's deployment record; the eraser's have none) the provisioner started, inspect and
// reboot the calls it accepted.
type countingProvisioner struct {
	provisioner.Provisioner
	mu                                                      sync.Mutex
	provision, adopt, deprovision, started, inspect, reboot map[string]int
}

type counts struct{ provision, adopt, deprovision, started, inspect, reboot map[string]int }

func (c *countingProvisioner) wrap(p provisioner.Provisioner) provisioner.Provisioner {
	c.Provisioner = p
	c.provision, c.adopt, c.deprovision = map[string]int{}, map[string]int{}, map[string]int{}
	c.started, c.inspect, c.reboot = map[string]int{}, map[string]int{}, map[string]int{}
	return c
}

// counted makes d's start counted.
func (c *countingProvisioner) counted(name string, d provisioner.Deployment) provisioner.Deployment {
	starting := d.Starting
	if starting == nil {
		return d
	}
	d.Starting = func(ctx context.Context) error {
		if err := starting(ctx); err != nil {
			return err
		}
		c.mu.Lock()
		c.started[name]++
		c.mu.Unlock()
		return nil
	}
	return d
}

func (c *countingProvisioner) count(m map[string]int, name string, err error) error {
	if err == nil {
		c.mu.Lock()
		m[name]++
		c.mu.Unlock()
	}
	return err
}

func (c *countingProvisioner) Rebuild(ctx context.Context, name string, d provisioner.Deployment) error {
	return c.Provisioner.Rebuild(ctx, name, c.counted(name, d))
}

func (c *countingProvisioner) Inspect(ctx context.Context, name string) error {
	return c.count(c.inspect, name, c.Provisioner.Inspect(ctx, name))
}

func (c *countingProvisioner) Reboot(ctx context.Context, name string) error {
	return c.count(c.reboot, name, c.Provisioner.Reboot(ctx, name))
}

func (c *countingProvisioner) Provision(ctx context.Context, name string, d provisioner.Deployment) error {
	err := c.Provisioner.Provision(ctx, name, c.counted(name, d))
	if err == nil {
		c.mu.Lock()
		c.provision[name]++
		c.mu.Unlock()
	}
	return err
}

func (c *countingProvisioner) Adopt(ctx context.Context, name string, d provisioner.Deployment) error {
	err := c.Provisioner.Adopt(ctx, name, d)
	if err == nil {
		c.mu.Lock()
		c.adopt[name]++
		c.mu.Unlock()
	}
	return err
}

func (c *countingProvisioner) Deprovision(ctx context.Context, name string) error {
	err := c.Provisioner.Deprovision(ctx, name)
	if err == nil {
		c.mu.Lock()
		c.deprovision[name]++
		c.mu.Unlock()
	}
	return err
}

func (c *countingProvisioner) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return counts{provision: maps.Clone(c.provision), adopt: maps.Clone(c.adopt), deprovision: maps.Clone(c.deprovision),
		started: maps.Clone(c.started), inspect: maps.Clone(c.inspect), reboot: maps.Clone(c.reboot)}
}

// hostWatch records every Host status a watch delivers.
type hostWatch struct {
	w      watch.Interface
	done   chan struct{}
	mu     sync.Mutex
	states map[string][]metalv1alpha1.ProvisioningState
	all    []metalv1alpha1.HostStatus
}

// watchStates starts recording the provisioning states of the namespace's Hosts.
func watchStates(t *testing.T, ns string) *hostWatch {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &metalv1alpha1.HostList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	hw := &hostWatch{w: w, done: make(chan struct{}), states: map[string][]metalv1alpha1.ProvisioningState{}}
	go func() {
		defer close(hw.done)
		for ev := range w.ResultChan() {
			h, ok := ev.Object.(*metalv1alpha1.Host)
			if !ok {
				continue
			}
			hw.mu.Lock()
			seen := hw.states[h.Name]
			if len(seen) == 0 || seen[len(seen)-1] != h.Status.ProvisioningState {
				hw.states[h.Name] = append(seen, h.Status.ProvisioningState)
			}
			hw.all = append(hw.all, *h.Status.DeepCopy())
			hw.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop() })
	return hw
}

// stop ends the watch and returns the distinct states seen per Host, in order.
func (hw *hostWatch) stop() map[string][]metalv1alpha1.ProvisioningState {
	hw.w.Stop()
	<-hw.done
	return hw.states
}

// statuses ends the watch and returns every status seen.
func (hw *hostWatch) statuses() []metalv1alpha1.HostStatus {
	hw.w.Stop()
	<-hw.done
	return hw.all
}
