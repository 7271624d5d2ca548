package ironic

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Hardware implements provisioner.Hardware: the inventory inspection stored (API 1.81+,
// from an agent or redfish inspection), otherwise what inspection put in the node's
// properties (the fake inspect interface sets none beyond what Register did).
func (p *Provisioner) Hardware(ctx context.Context, name string) (provisioner.Hardware, error) {
	n, ok := p.recent.peek(name)
	if !ok || n == nil {
		var err error
		if n, err = p.getNode(ctx, name); err != nil {
			return provisioner.Hardware{}, err
		}
	}
	switch {
	case n.ProvisionState == stInspecting || n.ProvisionState == stInspectWait:
		return provisioner.Hardware{}, busyErr(n, "read the hardware of")
	case n.InspectionFinishedAt == nil:
		return provisioner.Hardware{}, fmt.Errorf("read the hardware of node %s: not inspected: %w", name, provisioner.ErrWrongState)
	}
	hw := hardwareFromProperties(n.Properties)
	if p.version < inventoryVersion || n.Driver == "fake-hardware" {
		// Fake inspection stores no inventory: do not ask for one.
		return hw, nil
	}
	var inv *nodes.InventoryData
	err := p.do(ctx, "reading the inventory of node "+name, func(ctx context.Context) error {
		var err error
		inv, err = nodes.GetInventory(ctx, p.sc, name).Extract()
		return err
	})
	switch {
	case errors.Is(err, provisioner.ErrNotFound):
		// Inspected without an inventory (redfish inspection in Ironic 21 stores none, or
		// Ironic's DB was lost): the NICs are the ports inspection created.
		return p.withPorts(ctx, n, hw)
	case err != nil:
		return provisioner.Hardware{}, err
	}
	return mergeInventory(hw, inv.Inventory), nil
}

// withPorts adds the node's ports to hw as its NICs, named after their MAC addresses.
func (p *Provisioner) withPorts(ctx context.Context, n *nodes.Node, hw provisioner.Hardware) (provisioner.Hardware, error) {
	have, err := p.portsOf(ctx, n)
	if err != nil {
		return provisioner.Hardware{}, err
	}
	for _, pt := range have {
		hw.NICs = append(hw.NICs, provisioner.NIC{Name: pt.Address, MACAddress: pt.Address})
	}
	return hw, nil
}

// hardwareFromProperties reads cpu_arch, cpus, memory_mb and local_gb (numbers or strings).
func hardwareFromProperties(props map[string]any) provisioner.Hardware {
	hw := provisioner.Hardware{}
	if a, ok := props["cpu_arch"].(string); ok {
		hw.Architecture = goArch(a)
	}
	hw.CPUCount = int(number(props["cpus"]))
	hw.MemoryMiB = number(props["memory_mb"])
	if gb := number(props["local_gb"]); gb > 0 {
		hw.Disks = []provisioner.Disk{{Name: "root", SizeBytes: gb << 30}}
	}
	return hw
}

func number(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// mergeInventory prefers the inventory's richer data over the properties.
func mergeInventory(hw provisioner.Hardware, inv inventory.InventoryType) provisioner.Hardware {
	if inv.CPU.Architecture != "" {
		hw.Architecture = goArch(inv.CPU.Architecture)
	}
	if inv.CPU.Count > 0 {
		hw.CPUCount = inv.CPU.Count
	}
	hw.CPUModel = inv.CPU.ModelName
	if inv.Memory.PhysicalMb > 0 {
		hw.MemoryMiB = int64(inv.Memory.PhysicalMb)
	}
	if len(inv.Disks) > 0 {
		hw.Disks = nil
		for _, d := range inv.Disks {
			hw.Disks = append(hw.Disks, provisioner.Disk{Name: d.Name, SerialNumber: d.Serial, WWN: d.Wwn,
				Model: d.Model, SizeBytes: d.Size, Rotational: d.Rotational})
		}
	}
	for _, i := range inv.Interfaces {
		hw.NICs = append(hw.NICs, provisioner.NIC{Name: i.Name, MACAddress: i.MACAddress, IP: i.IPV4Address,
			SpeedGbps: i.SpeedMbps / 1000})
	}
	return hw
}
