package ironic

import (
	"context"
	"errors"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

func wrongStateErr(n *nodes.Node, op string) error {
	return fmt.Errorf("%s node %s: it is %q: %w", op, n.Name, n.ProvisionState, provisioner.ErrWrongState)
}

func busyErr(n *nodes.Node, op string) error {
	return fmt.Errorf("%s node %s: Ironic is working on it (%q, target %q): %w", op, n.Name, n.ProvisionState, n.TargetProvisionState, provisioner.ErrBusy)
}

// Inspect implements provisioner.Provisioner. A node inspected already is left alone; a
// failed inspection is started again.
func (p *Provisioner) Inspect(ctx context.Context, name string) error {
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case n.ProvisionState == stInspecting || n.ProvisionState == stInspectWait:
		return nil
	case n.ProvisionState == stManageable && n.InspectionFinishedAt != nil:
		return nil
	case busy(n):
		return busyErr(n, "inspect")
	case n.ProvisionState == stManageable || n.ProvisionState == stInspectFailed:
		p.log.Info("inspecting node", "node", name)
		return p.setProvision(ctx, name, nodes.TargetInspect, nil)
	}
	return wrongStateErr(n, "inspect")
}

// Provide implements provisioner.Provisioner; it takes a clean slot. A node whose
// cleaning failed is made manageable first, and provided on the next call.
func (p *Provisioner) Provide(ctx context.Context, name string) error {
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case n.ProvisionState == stAvailable, n.ProvisionState == stCleaning, n.ProvisionState == stCleanWait:
		return nil
	case busy(n):
		return busyErr(n, "provide")
	case n.ProvisionState == stCleanFailed:
		return p.manageAgain(ctx, n, "provide")
	case n.ProvisionState == stManageable:
		return p.startWork(ctx, p.cleans, name, nodes.TargetProvide, nil)
	}
	return wrongStateErr(n, "provide")
}

// manageAgain takes a failed node (clean failed, adopt failed) back to manageable, and
// asks the caller to come back: ErrBusy.
func (p *Provisioner) manageAgain(ctx context.Context, n *nodes.Node, op string) error {
	p.log.Info("making failed node manageable again", "node", n.Name, "state", n.ProvisionState)
	if err := p.setProvision(ctx, n.Name, nodes.TargetManage, nil); err != nil {
		return err
	}
	return fmt.Errorf("%s node %s: made %q node manageable first: %w", op, n.Name, n.ProvisionState, provisioner.ErrBusy)
}

// startWork takes a slot of q and asks Ironic for target. When the request fails the slot
// stays taken but no longer pending: the background check frees it unless the node did
// start (an answer lost on the way).
func (p *Provisioner) startWork(ctx context.Context, q *queue, name string, target nodes.TargetProvisionState, cd map[string]any) error {
	if err := p.admit(q, name); err != nil {
		return err
	}
	err := p.setProvision(ctx, name, target, cd)
	if errors.Is(err, provisioner.ErrWrongState) || errors.Is(err, provisioner.ErrNotFound) || errors.Is(err, provisioner.ErrInvalid) {
		p.wake(q.release(name))
		return err
	}
	q.started(name)
	return err
}

// Provision implements provisioner.Provisioner; it takes a deploy slot. A node deploying
// or active with the same image is success; a failed deploy is started again.
func (p *Provisioner) Provision(ctx context.Context, name string, d provisioner.Deployment) error {
	info, cd, err := deploymentInfo(d)
	if err != nil {
		return fmt.Errorf("provision node %s: %w", name, err)
	}
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	switch n.ProvisionState {
	case stDeploying, stDeployWait, stActive:
		if sameImage(imageOf(n.InstanceInfo), d.Image) {
			return nil
		}
		return fmt.Errorf("provision node %s: it is %q with another image: %w", name, n.ProvisionState, provisioner.ErrWrongState)
	case stAvailable, stDeployFailed:
		if busy(n) {
			return busyErr(n, "provision")
		}
	default:
		return wrongStateErr(n, "provision")
	}
	return p.deploy(ctx, n, d, info, cd, nodes.TargetActive, "provision")
}

// Rebuild implements provisioner.Provisioner with Ironic's rebuild (active or deploy
// failed -> deploying -> active: the image written again, the new config drive stored,
// nothing cleaned); it takes a deploy slot. The token kept in instance_info tells this
// rebuild, started or done, from an earlier deployment of the same image.
func (p *Provisioner) Rebuild(ctx context.Context, name string, d provisioner.Deployment) error {
	info, cd, err := deploymentInfo(d)
	if err != nil {
		return fmt.Errorf("rebuild node %s: %w", name, err)
	}
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	switch n.ProvisionState {
	case stDeploying, stDeployWait, stActive:
		if sameImage(imageOf(n.InstanceInfo), d.Image) && tokenOf(n.InstanceInfo) == d.Token {
			return nil
		}
		if n.ProvisionState != stActive {
			return busyErr(n, "rebuild") // another deployment runs: rebuild once it is over
		}
	case stDeployFailed:
	default:
		return wrongStateErr(n, "rebuild")
	}
	if busy(n) {
		return busyErr(n, "rebuild")
	}
	if want := deployInterface(d.Image); n.Driver == "redfish" && n.DeployInterface != want {
		// Ironic changes a node's deploy interface only while it is available or manageable.
		return fmt.Errorf("rebuild node %s: it runs a deployment of the %s deploy interface and the image needs %s, "+
			"which Ironic does not switch on a deployed node: deprovision it and provision the image instead: %w",
			name, n.DeployInterface, want, provisioner.ErrInvalid)
	}
	return p.deploy(ctx, n, d, info, cd, nodes.TargetRebuild, "rebuild")
}

// deploy sets node n's instance_info to info (and the deploy interface d's image needs),
// then asks Ironic for target (deploy, rebuild or adopt) with config drive cd, holding a
// deploy slot; d.Starting is called once the slot is held, before anything is written.
// op names the operation in errors and logs.
func (p *Provisioner) deploy(ctx context.Context, n *nodes.Node, d provisioner.Deployment, info, cd map[string]any, target nodes.TargetProvisionState, op string) error {
	img := d.Image
	ops, err := imageOps(n, img, info)
	if err != nil {
		return fmt.Errorf("%s node %s: %w", op, n.Name, err)
	}
	if err := p.admit(p.deploys, n.Name); err != nil {
		return err
	}
	if d.Starting != nil {
		if err := d.Starting(ctx); err != nil {
			p.wake(p.deploys.release(n.Name))
			return err
		}
	}
	p.log.Info("deploying node", "node", n.Name, "operation", op, "image", img.URL, "ramdisk", img.Ramdisk())
	if _, err := p.patch(ctx, n.Name, "setting the image", ops); err != nil {
		p.wake(p.deploys.release(n.Name))
		return err
	}
	return p.startWork(ctx, p.deploys, n.Name, target, cd)
}

// imageOps sets the node's instance_info to info and, on a node that deploys through an
// agent or a ramdisk (redfish), the deploy interface img needs. A kernel and initramfs
// boot only from virtual media: a node that boots over PXE (ipmi) cannot take them.
func imageOps(n *nodes.Node, img provisioner.Image, info map[string]any) (nodes.UpdateOpts, error) {
	ops := nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info", Value: info}}
	switch {
	case n.Driver == "redfish":
		if want := deployInterface(img); n.DeployInterface != want {
			ops = append(ops, nodes.UpdateOperation{Op: nodes.ReplaceOp, Path: "/deploy_interface", Value: want})
		}
	case img.Ramdisk() && n.Driver != "fake-hardware":
		return nil, fmt.Errorf("a kernel and initramfs are booted through Redfish virtual media; a %s BMC cannot: %w", n.Driver, provisioner.ErrInvalid)
	}
	return ops, nil
}

// Deprovision implements provisioner.Provisioner; it takes a clean slot.
func (p *Provisioner) Deprovision(ctx context.Context, name string) error {
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case n.ProvisionState == stAvailable, n.ProvisionState == stDeleting,
		n.ProvisionState == stCleaning, n.ProvisionState == stCleanWait:
		return nil
	case busy(n) && n.ProvisionState != stDeployWait:
		return busyErr(n, "deprovision")
	case n.ProvisionState == stActive, n.ProvisionState == stDeployFailed,
		n.ProvisionState == stDeployWait, n.ProvisionState == stError:
		p.log.Info("deprovisioning node", "node", name, "state", n.ProvisionState)
		return p.startWork(ctx, p.cleans, name, nodes.TargetDeleted, nil)
	case n.ProvisionState == stCleanFailed, n.ProvisionState == stAdoptFailed:
		return p.manageAgain(ctx, n, "deprovision")
	case n.ProvisionState == stManageable:
		return p.startWork(ctx, p.cleans, name, nodes.TargetProvide, nil)
	}
	return wrongStateErr(n, "deprovision")
}

// Power implements provisioner.Provisioner; asking for the power state the node has, or
// is already going to, does nothing.
func (p *Provisioner) Power(ctx context.Context, name string, on bool) error {
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	want := nodes.PowerOff
	if on {
		want = nodes.PowerOn
	}
	switch {
	case n.TargetPowerState == string(want):
		return nil
	case n.TargetPowerState != "":
		return fmt.Errorf("power node %s: already going to %q: %w", name, n.TargetPowerState, provisioner.ErrBusy)
	case n.PowerState == string(want):
		return nil
	}
	p.log.Info("powering node", "node", name, "on", on)
	return p.write(ctx, name, fmt.Sprintf("%s node %s", want, name), func(ctx context.Context) error {
		return nodes.ChangePowerState(ctx, p.sc, name, nodes.PowerStateOpts{Target: want}).ExtractErr()
	})
}

// Reboot implements provisioner.Provisioner.
func (p *Provisioner) Reboot(ctx context.Context, name string) error {
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	if n.TargetPowerState != "" {
		return fmt.Errorf("reboot node %s: already going to %q: %w", name, n.TargetPowerState, provisioner.ErrBusy)
	}
	p.log.Info("rebooting node", "node", name)
	return p.write(ctx, name, fmt.Sprintf("reboot node %s", name), func(ctx context.Context) error {
		return nodes.ChangePowerState(ctx, p.sc, name, nodes.PowerStateOpts{Target: nodes.Rebooting}).ExtractErr()
	})
}

// Adopt implements provisioner.Provisioner; it takes a deploy slot.
func (p *Provisioner) Adopt(ctx context.Context, name string, d provisioner.Deployment) error {
	info, err := instanceInfo(d.Image, d.BootMode)
	if err != nil {
		return fmt.Errorf("adopt node %s: %w", name, err)
	}
	n, err := p.getNode(ctx, name)
	if err != nil {
		return err
	}
	switch n.ProvisionState {
	case stAdopting, stActive:
		if sameImage(imageOf(n.InstanceInfo), d.Image) {
			return nil
		}
		return fmt.Errorf("adopt node %s: it is %q with another image: %w", name, n.ProvisionState, provisioner.ErrWrongState)
	case stManageable, stAdoptFailed:
		if busy(n) {
			return busyErr(n, "adopt")
		}
	default:
		return wrongStateErr(n, "adopt")
	}
	if d.Token != "" {
		info[infoRequest] = d.Token
	}
	d.Starting = nil // an adoption deploys nothing
	return p.deploy(ctx, n, d, info, nil, nodes.TargetAdopt, "adopt")
}

// Detach implements provisioner.Provisioner: maintenance on (Ironic then deletes a node in
// any state without touching the server), then delete. A node already gone is success.
func (p *Provisioner) Detach(ctx context.Context, name string) error {
	n, err := p.getNode(ctx, name)
	if errors.Is(err, provisioner.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !n.Maintenance {
		err := p.write(ctx, name, "setting maintenance on node "+name, func(ctx context.Context) error {
			return nodes.SetMaintenance(ctx, p.sc, name, nodes.MaintenanceOpts{Reason: "detached by anvil"}).ExtractErr()
		})
		if err != nil {
			return err
		}
	}
	p.log.Info("detaching node", "node", name, "state", n.ProvisionState)
	return p.deleteNode(ctx, name)
}

// Delete implements provisioner.Provisioner: from available, manageable, enroll or adopt
// failed (where Ironic deletes nodes); a node already gone is success.
func (p *Provisioner) Delete(ctx context.Context, name string) error {
	n, err := p.getNode(ctx, name)
	if errors.Is(err, provisioner.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case busy(n):
		return busyErr(n, "delete")
	case n.ProvisionState == stAvailable, n.ProvisionState == stManageable,
		n.ProvisionState == stEnroll, n.ProvisionState == stAdoptFailed:
		p.log.Info("deleting node", "node", name, "state", n.ProvisionState)
		return p.deleteNode(ctx, name)
	}
	return wrongStateErr(n, "delete")
}

func (p *Provisioner) deleteNode(ctx context.Context, name string) error {
	err := p.write(ctx, name, "deleting node "+name, func(ctx context.Context) error {
		return nodes.Delete(ctx, p.sc, name).ExtractErr()
	})
	if err == nil || errors.Is(err, provisioner.ErrNotFound) {
		p.forget(name)
		return nil
	}
	return err
}
