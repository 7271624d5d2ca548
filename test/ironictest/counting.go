package ironictest

import (
	"context"
	"maps"
	"sync"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Counting counts the deployments and adoptions a real provisioner is asked for, so a
// test can tell adoption from re-imaging: started counts the deployments of a consumer's
// image (provisions and rebuilds: those with a Starting hook, which writes the Host's
// deployment record; the eraser's have none) the provisioner started, inspect and reboot
// the calls it accepted. Wrap goes into a site's configuration (site.Config.WrapProvisioner).
type Counting struct {
	provisioner.Provisioner
	mu                                                      sync.Mutex
	provision, adopt, deprovision, started, inspect, reboot map[string]int
}

// Counts is a snapshot of a Counting's counts, by node name.
type Counts struct{ Provision, Adopt, Deprovision, Started, Inspect, Reboot map[string]int }

// Wrap makes c count p's calls and returns c.
func (c *Counting) Wrap(p provisioner.Provisioner) provisioner.Provisioner {
	c.Provisioner = p
	c.provision, c.adopt, c.deprovision = map[string]int{}, map[string]int{}, map[string]int{}
	c.started, c.inspect, c.reboot = map[string]int{}, map[string]int{}, map[string]int{}
	return c
}

// counted makes d's start counted.
func (c *Counting) counted(name string, d provisioner.Deployment) provisioner.Deployment {
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

func (c *Counting) count(m map[string]int, name string, err error) error {
	if err == nil {
		c.mu.Lock()
		m[name]++
		c.mu.Unlock()
	}
	return err
}

func (c *Counting) Rebuild(ctx context.Context, name string, d provisioner.Deployment) error {
	return c.Provisioner.Rebuild(ctx, name, c.counted(name, d))
}

func (c *Counting) Inspect(ctx context.Context, name string) error {
	return c.count(c.inspect, name, c.Provisioner.Inspect(ctx, name))
}

func (c *Counting) Reboot(ctx context.Context, name string) error {
	return c.count(c.reboot, name, c.Provisioner.Reboot(ctx, name))
}

func (c *Counting) Provision(ctx context.Context, name string, d provisioner.Deployment) error {
	err := c.Provisioner.Provision(ctx, name, c.counted(name, d))
	if err == nil {
		c.mu.Lock()
		c.provision[name]++
		c.mu.Unlock()
	}
	return err
}

func (c *Counting) Adopt(ctx context.Context, name string, d provisioner.Deployment) error {
	err := c.Provisioner.Adopt(ctx, name, d)
	if err == nil {
		c.mu.Lock()
		c.adopt[name]++
		c.mu.Unlock()
	}
	return err
}

func (c *Counting) Deprovision(ctx context.Context, name string) error {
	err := c.Provisioner.Deprovision(ctx, name)
	if err == nil {
		c.mu.Lock()
		c.deprovision[name]++
		c.mu.Unlock()
	}
	return err
}

// Snapshot is what c has counted so far.
func (c *Counting) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Counts{Provision: maps.Clone(c.provision), Adopt: maps.Clone(c.adopt), Deprovision: maps.Clone(c.deprovision),
		Started: maps.Clone(c.started), Inspect: maps.Clone(c.inspect), Reboot: maps.Clone(c.reboot)}
}
