package ironic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// getNode is the node as the caller's Get just read it (see reuseFor), or as Ironic has
// it now.
func (p *Provisioner) getNode(ctx context.Context, name string) (*nodes.Node, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if n, ok := p.recent.take(name); ok {
		if n == nil {
			return nil, fmt.Errorf("node %s: %w", name, provisioner.ErrNotFound)
		}
		return n, nil
	}
	return p.fetchNode(ctx, name)
}

// fetchNode reads one node by name from Ironic and lets the queues see its state.
func (p *Provisioner) fetchNode(ctx context.Context, name string) (*nodes.Node, error) {
	var n *nodes.Node
	err := p.do(ctx, "reading node "+name, func(ctx context.Context) error {
		var err error
		n, err = nodes.Get(ctx, p.sc, name).Extract()
		return err
	})
	if err != nil {
		if errors.Is(err, provisioner.ErrNotFound) {
			p.forget(name)
		}
		return nil, err
	}
	p.observe(name, n.ProvisionState, n.TargetProvisionState)
	return n, nil
}

// Get implements provisioner.Provisioner. It always asks Ironic; the answer also serves
// the next operation on the node if it comes within reuseFor.
func (p *Provisioner) Get(ctx context.Context, name string) (provisioner.Node, error) {
	if err := checkName(name); err != nil {
		return provisioner.Node{}, err
	}
	began := p.recent.begin(name)
	n, err := p.fetchNode(ctx, name)
	if errors.Is(err, provisioner.ErrNotFound) {
		p.recent.put(name, nil, began)
	}
	if err != nil {
		return provisioner.Node{}, err
	}
	p.recent.put(name, n, began)
	return nodeOf(n), nil
}

// write is do for a request that changes node name: a read of it from before the change
// is never used after.
func (p *Provisioner) write(ctx context.Context, name, what string, f func(context.Context) error) error {
	p.recent.written(name)
	defer p.recent.written(name)
	return p.do(ctx, what, f)
}

// setProvision asks for a provision state change; configDrive may be nil.
func (p *Provisioner) setProvision(ctx context.Context, name string, target nodes.TargetProvisionState, cd map[string]any) error {
	opts := nodes.ProvisionStateOpts{Target: target}
	if cd != nil {
		opts.ConfigDrive = cd
	}
	err := p.write(ctx, name, fmt.Sprintf("%s node %s", target, name), func(ctx context.Context) error {
		return nodes.ChangeProvisionState(ctx, p.sc, name, opts).ExtractErr()
	})
	if errors.Is(err, provisioner.ErrWrongState) {
		// A retried request (the first timed out) finds the node already on its way:
		// that is the first request's success, not a failure.
		if n, gerr := p.fetchNode(ctx, name); gerr == nil && headingTo(target, n.ProvisionState, n.TargetProvisionState) {
			return nil
		}
	}
	return err
}

// headingTo reports whether a node in state (going to target) is where a request for
// want leads.
func headingTo(want nodes.TargetProvisionState, state, target string) bool {
	leads := map[nodes.TargetProvisionState][]string{
		nodes.TargetManage:  {stVerifying, stManageable},
		nodes.TargetInspect: {stInspecting, stInspectWait},
		nodes.TargetProvide: {stCleaning, stCleanWait, stAvailable},
		nodes.TargetActive:  {stDeploying, stDeployWait, stActive},
		nodes.TargetRebuild: {stDeploying, stDeployWait, stActive},
		nodes.TargetDeleted: {stDeleting, stCleaning, stCleanWait, stAvailable},
		nodes.TargetAdopt:   {stAdopting, stActive},
	}
	for _, s := range leads[want] {
		if state == s || target == s {
			return true
		}
	}
	return false
}

// patch applies JSON-patch operations to a node.
func (p *Provisioner) patch(ctx context.Context, name, what string, ops nodes.UpdateOpts) (*nodes.Node, error) {
	var n *nodes.Node
	err := p.write(ctx, name, what+" of node "+name, func(ctx context.Context) error {
		var err error
		n, err = nodes.Update(ctx, p.sc, name, ops).Extract()
		return err
	})
	return n, err
}

// create registers a new node with its registration hash. A crash before its port exists
// is repaired by the next Register: a node still in enroll always has its port checked.
func (p *Provisioner) create(ctx context.Context, r provisioner.Registration, d driverSpec, hash string) (*nodes.Node, error) {
	body := rawJSON{
		"name":        r.Name,
		"driver":      d.Driver,
		"driver_info": d.DriverInfo,
		"properties":  properties(r),
		"extra":       map[string]any{extraHash: hash},
	}
	for k, v := range d.Interfaces {
		body[k] = v
	}
	var n *nodes.Node
	err := p.write(ctx, r.Name, "creating node "+r.Name, func(ctx context.Context) error {
		var err error
		n, err = nodes.Create(ctx, p.sc, body).Extract()
		if code, _ := statusOf(err); code == 409 {
			// Created meanwhile (a retried request whose first answer was lost).
			n, err = nodes.Get(ctx, p.sc, r.Name).Extract()
		}
		return err
	})
	return n, err
}

// update makes an existing node's driver, BMC details and properties match r.
func (p *Provisioner) update(ctx context.Context, n *nodes.Node, r provisioner.Registration, d driverSpec) (*nodes.Node, error) {
	var ops nodes.UpdateOpts
	if n.Driver != d.Driver {
		ops = append(ops, nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/driver", Value: d.Driver})
	}
	ops = append(ops, nodes.UpdateOperation{Op: nodes.AddOp, Path: "/driver_info", Value: d.DriverInfo})
	for k, v := range d.Interfaces {
		if k == "deploy_interface" && n.Driver == d.Driver && (n.DeployInterface == "direct" || n.DeployInterface == "ramdisk") {
			continue // chosen per image by Provision and Adopt: a new registration keeps it
		}
		ops = append(ops, nodes.UpdateOperation{Op: nodes.AddOp, Path: "/" + k, Value: v})
	}
	props := properties(r)
	keys := []string{"cpu_arch", "root_device"}
	if d.Driver == "fake-hardware" {
		// Only a fake server's size comes from its registration; a real one's comes from
		// inspection and must survive a new registration.
		keys = append(keys, fakeProperties...)
	}
	for _, k := range keys {
		if v, ok := props[k]; ok {
			ops = append(ops, nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/" + k, Value: v})
		} else if _, had := n.Properties[k]; had {
			ops = append(ops, nodes.UpdateOperation{Op: nodes.RemoveOp, Path: "/properties/" + k})
		}
	}
	return p.patch(ctx, r.Name, "updating the BMC details", ops)
}

// Ports anvil creates carry this in extra, so only those are ever removed.
const portMarkKey, portMarkValue = "anvil", "boot-mac"

// ensurePort makes the boot MAC the node's one anvil port. A node this call created has
// no ports yet, so fresh skips reading them.
func (p *Provisioner) ensurePort(ctx context.Context, n *nodes.Node, mac string, fresh bool) error {
	mac = strings.ToLower(mac)
	var have []ports.Port
	if !fresh {
		var err error
		if have, err = p.portsOf(ctx, n); err != nil {
			return err
		}
	}
	if err := p.removeOldPorts(ctx, n, have, mac); err != nil {
		return err
	}
	if slices.ContainsFunc(have, hasMAC(mac)) || mac == "" {
		return nil
	}
	body := rawJSON{"node_uuid": n.UUID, "address": mac, "extra": map[string]any{portMarkKey: portMarkValue}}
	err := p.write(ctx, n.Name, "creating the boot port of node "+n.Name, func(ctx context.Context) error {
		return ports.Create(ctx, p.sc, body).Err
	})
	if errors.Is(err, provisioner.ErrBusy) && strings.Contains(err.Error(), "already exists") {
		// A retried create whose first answer was lost made the port already; only a port
		// of another node is the user's mistake.
		mine, lerr := p.portsOf(ctx, n)
		if lerr != nil {
			return lerr
		}
		if slices.ContainsFunc(mine, hasMAC(mac)) {
			return nil
		}
		return fmt.Errorf("boot MAC address %s of node %s is registered to another node: %w", mac, n.Name, provisioner.ErrInvalid)
	}
	return err
}

func hasMAC(mac string) func(ports.Port) bool {
	return func(pt ports.Port) bool { return strings.EqualFold(pt.Address, mac) }
}

// portsOf lists the node's ports (uuid, address, extra).
func (p *Provisioner) portsOf(ctx context.Context, n *nodes.Node) ([]ports.Port, error) {
	var list struct {
		Ports []ports.Port `json:"ports"`
	}
	url := p.sc.ServiceURL("ports") + "?node_uuid=" + n.UUID + "&fields=uuid,address,extra"
	err := p.do(ctx, "listing the ports of node "+n.Name, func(ctx context.Context) error {
		_, err := p.sc.Get(ctx, url, &list, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return err
	})
	return list.Ports, err
}

// removeOldPorts deletes the ports anvil made for another boot MAC.
func (p *Provisioner) removeOldPorts(ctx context.Context, n *nodes.Node, have []ports.Port, mac string) error {
	for _, pt := range have {
		if strings.EqualFold(pt.Address, mac) {
			continue
		}
		if pt.Extra[portMarkKey] != portMarkValue {
			continue // found by inspection or made by hand: not ours
		}
		err := p.write(ctx, n.Name, "removing the old boot port of node "+n.Name, func(ctx context.Context) error {
			err := ports.Delete(ctx, p.sc, pt.UUID).ExtractErr()
			if code, _ := statusOf(err); code == 404 {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Register implements provisioner.Provisioner. Unchanged details cost one GET; a node
// left in enroll (its BMC check failed) is asked to manage again.
func (p *Provisioner) Register(ctx context.Context, r provisioner.Registration) (provisioner.Node, error) {
	n, err := p.register(ctx, r)
	return n, redact(err, r.Password)
}

func (p *Provisioner) register(ctx context.Context, r provisioner.Registration) (provisioner.Node, error) {
	if err := checkName(r.Name); err != nil {
		return provisioner.Node{}, err
	}
	d, err := driverFor(r)
	if err != nil {
		return provisioner.Node{}, err
	}
	hash := registrationHash(p.hashKey, d, r)
	var n *nodes.Node
	if r.New {
		// Most likely unknown to Ironic: create straight away; a node that exists after
		// all answers 409, and create reads it instead.
		err = provisioner.ErrNotFound
	} else {
		n, err = p.getNode(ctx, r.Name)
	}
	created := false
	switch {
	case errors.Is(err, provisioner.ErrNotFound):
		p.log.Info("registering node", "node", r.Name, "driver", d.Driver)
		if n, err = p.create(ctx, r, d, hash); err != nil {
			return provisioner.Node{}, err
		}
		created = true
	case err != nil:
		return provisioner.Node{}, err
	case n.Extra[extraHash] != hash:
		p.log.Info("updating node's BMC details", "node", r.Name, "driver", d.Driver)
		if n, err = p.update(ctx, n, r, d); err != nil {
			return provisioner.Node{}, err
		}
	}
	enrolling := n.ProvisionState == stEnroll && n.TargetProvisionState == ""
	if n.Extra[extraHash] != hash || enrolling {
		if err := p.ensurePort(ctx, n, r.BootMACAddress, created); err != nil {
			return provisioner.Node{}, err
		}
	}
	if n.Extra[extraHash] != hash {
		ops := nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/extra/" + extraHash, Value: hash}}
		if n, err = p.patch(ctx, r.Name, "recording the registration", ops); err != nil {
			return provisioner.Node{}, err
		}
	}
	// Not busy(n): the PATCH answer shows the lock the update itself held.
	if enrolling {
		if err := p.setProvision(ctx, r.Name, nodes.TargetManage, nil); err != nil {
			return provisioner.Node{}, err
		}
		// Verifying now; the caller's next Get tells how it went.
		n.TargetProvisionState = stManageable
	}
	return nodeOf(n), nil
}

// observe lets both queues see a node's state, and wakes the waiters a freed slot lets in.
func (p *Provisioner) observe(name, state, target string) {
	for _, q := range []*queue{p.deploys, p.cleans} {
		p.wake(q.observe(name, state, target))
	}
}

// forget frees the slots and queue places of a node that is gone.
func (p *Provisioner) forget(name string) {
	for _, q := range []*queue{p.deploys, p.cleans} {
		p.wake(q.release(name))
	}
}

func (p *Provisioner) wake(names []string) {
	if p.notify == nil {
		return
	}
	for _, n := range names {
		p.notify(n)
	}
}

// admit takes a slot of q for name, or says how long the queue is in an ErrBusy.
func (p *Provisioner) admit(q *queue, name string) error {
	ok, ahead := q.admit(name, time.Now())
	if ok {
		p.kick()
		return nil
	}
	inflight, _ := q.counts()
	return fmt.Errorf("node %s waits for a %s slot (%d in use, %d ahead of it): %w", name, q.kind, inflight, ahead, provisioner.ErrBusy)
}

// kick makes sure the background check of the nodes holding slots runs.
func (p *Provisioner) kick() {
	p.checkMu.Lock()
	defer p.checkMu.Unlock()
	if p.checking {
		return
	}
	select {
	case <-p.closed:
		return
	default:
	}
	p.checking = true
	go p.checkLoop()
}

// checkLoop looks at each node holding a slot every interval, freeing the slots of nodes
// done, until none holds one.
func (p *Provisioner) checkLoop() {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.closed:
			p.checkMu.Lock()
			p.checking = false
			p.checkMu.Unlock()
			return
		case <-t.C:
		}
		p.checkMu.Lock()
		d, _ := p.deploys.counts()
		c, _ := p.cleans.counts()
		if d+c == 0 {
			p.checking = false
			p.checkMu.Unlock()
			return
		}
		p.checkMu.Unlock()
		// A node a caller read within a few intervals is being watched by that caller.
		quiet := time.Now().Add(-10 * p.interval)
		for _, name := range append(p.deploys.inflightNames(quiet), p.cleans.inflightNames(quiet)...) {
			p.checkOne(name)
		}
	}
}

// checkOne reads only what freeing a slot needs.
func (p *Provisioner) checkOne(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n struct {
		ProvisionState       string `json:"provision_state"`
		TargetProvisionState string `json:"target_provision_state"`
	}
	url := p.sc.ServiceURL("nodes", name) + "?fields=provision_state,target_provision_state"
	_, err := p.sc.Get(ctx, url, &n, &gophercloud.RequestOpts{OkCodes: []int{200}})
	if code, _ := statusOf(err); code == 404 {
		p.forget(name)
		return
	}
	if err != nil {
		return // Ironic is busy or restarting; next round
	}
	p.observe(name, n.ProvisionState, n.TargetProvisionState)
}
