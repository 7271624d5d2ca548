package ironic

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
)

var testImage = provisioner.Image{URL: "http://127.0.0.1:9/os.raw", Checksum: "sha256:" + strings.Repeat("ab", 32), Format: "raw"}

// One fake node through its whole life, every call made twice.
func TestFullCycle(t *testing.T) {
	irc := shared.Ironic(t)
	p, logs := newProvisioner(t, irc, nil)
	ctx := context.Background()
	const name = "site-a~host-1"
	start := time.Now()

	reg := fakeHost(name)
	reg.RootDeviceHints = map[string]any{"size": ">= 10"}
	twice(t, "Register", func() error { _, err := p.Register(ctx, reg); return err })
	n := waitState(t, p, name, provisioner.StateManageable)
	if n.ID == "" || n.RegistrationHash == "" {
		t.Errorf("registered node %+v lacks an ID or a registration hash", n)
	}
	// Registering again with nothing changed is one GET and changes nothing.
	if again, err := p.Register(ctx, reg); err != nil || again.RegistrationHash != n.RegistrationHash || again.State != provisioner.StateManageable {
		t.Errorf("Register again = %+v, %v", again, err)
	}

	twice(t, "Inspect", func() error { return p.Inspect(ctx, name) })
	waitFor(t, p, name, time.Minute, "inspected", func(n provisioner.Node) bool { return n.State == provisioner.StateManageable && !n.Busy })
	var hw provisioner.Hardware
	retryBusy(t, "Hardware", func() (err error) { hw, err = p.Hardware(ctx, name); return err })
	if hw.Architecture != "amd64" {
		t.Errorf("Hardware = %+v, want architecture amd64 (from cpu_arch)", hw)
	}

	twice(t, "Provide", func() error { return p.Provide(ctx, name) })
	waitState(t, p, name, provisioner.StateAvailable)

	d := provisioner.Deployment{Image: testImage, ConfigDrive: &provisioner.ConfigDrive{
		UserData:    []byte("#cloud-config\nhostname: host-1\n"),
		MetaData:    map[string]any{"uuid": "u-1", "name": "host-1"},
		NetworkData: map[string]any{"links": []any{}, "networks": []any{}, "services": []any{}},
	}}
	twice(t, "Provision", func() error { return p.Provision(ctx, name, d) })
	n = waitState(t, p, name, provisioner.StateActive)
	if n.Image != testImage {
		t.Errorf("active node's image = %+v, want %+v", n.Image, testImage)
	}
	if err := p.Provision(ctx, name, d); err != nil {
		t.Errorf("Provision of an active node with its image: %v", err)
	}
	other := d
	other.Image.URL = "http://127.0.0.1:9/other.raw"
	if err := p.Provision(ctx, name, other); !errors.Is(err, provisioner.ErrWrongState) {
		t.Errorf("Provision of an active node with another image: %v, want ErrWrongState", err)
	}

	for _, on := range []bool{false, true} {
		retryBusy(t, "Power", func() error { return p.Power(ctx, name, on) })
		if err := p.Power(ctx, name, on); err != nil {
			t.Errorf("Power(%v) again: %v", on, err)
		}
		waitFor(t, p, name, 30*time.Second, "powered", func(n provisioner.Node) bool {
			return n.PowerOn != nil && *n.PowerOn == on && !n.Busy
		})
	}

	retryBusy(t, "Deprovision", func() error { return p.Deprovision(ctx, name) })
	if err := p.Deprovision(ctx, name); err != nil {
		t.Errorf("Deprovision again: %v", err)
	}
	waitState(t, p, name, provisioner.StateAvailable)

	if err := p.Adopt(ctx, name, provisioner.Deployment{Image: testImage}); !errors.Is(err, provisioner.ErrWrongState) {
		t.Errorf("Adopt of an available node: %v, want ErrWrongState", err)
	}
	twice(t, "Delete", func() error { return p.Delete(ctx, name) })
	if _, err := p.Get(ctx, name); !errors.Is(err, provisioner.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := p.Inspect(ctx, name); !errors.Is(err, provisioner.ErrNotFound) {
		t.Errorf("Inspect of a deleted node: %v, want ErrNotFound", err)
	}
	t.Logf("full cycle took %s", time.Since(start).Round(time.Millisecond))
	if strings.Contains(logs.String(), ironictest.Password) {
		t.Error("the provisioner logged Ironic's password")
	}
}

func TestWrongStates(t *testing.T) {
	irc := shared.Ironic(t)
	p, _ := newProvisioner(t, irc, nil)
	ctx := context.Background()
	const name = "ns~wrong"
	if _, err := p.Register(ctx, fakeHost(name)); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, name, provisioner.StateManageable)
	if err := p.Provision(ctx, name, provisioner.Deployment{Image: testImage}); !errors.Is(err, provisioner.ErrWrongState) {
		t.Errorf("Provision of a manageable node: %v, want ErrWrongState", err)
	}
	if _, err := p.Hardware(ctx, name); !errors.Is(err, provisioner.ErrWrongState) {
		t.Errorf("Hardware of a node never inspected: %v, want ErrWrongState", err)
	}
	if err := p.Provision(ctx, "no~such", provisioner.Deployment{Image: testImage}); !errors.Is(err, provisioner.ErrNotFound) {
		t.Errorf("Provision of a missing node: %v, want ErrNotFound", err)
	}
	if err := p.Provision(ctx, "bad/name", provisioner.Deployment{Image: testImage}); !errors.Is(err, provisioner.ErrInvalid) {
		t.Errorf("Provision of a bad name: %v, want ErrInvalid", err)
	}
	if _, err := p.Register(ctx, provisioner.Registration{Name: "ns~x", BMCAddress: "idrac://h"}); !errors.Is(err, provisioner.ErrInvalid) {
		t.Errorf("Register with an unsupported BMC: %v, want ErrInvalid", err)
	}
	// Adopted nodes can be deprovisioned; an active node cannot be deleted.
	if err := p.Adopt(ctx, name, provisioner.Deployment{Image: testImage}); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, name, provisioner.StateActive)
	if err := p.Delete(ctx, name); !errors.Is(err, provisioner.ErrWrongState) {
		t.Errorf("Delete of an active node: %v, want ErrWrongState", err)
	}
	// Registering a second node with the same boot MAC is refused.
	dup := fakeHost("ns~dup")
	dup.BootMACAddress = macFor(name)
	if _, err := p.Register(ctx, dup); !errors.Is(err, provisioner.ErrInvalid) {
		t.Errorf("Register with another node's boot MAC: %v, want ErrInvalid", err)
	}
}

// A registration that changes (new BMC address, MAC, architecture) updates the node.
func TestRegisterUpdates(t *testing.T) {
	irc := shared.Ironic(t)
	p, _ := newProvisioner(t, irc, nil)
	ctx := context.Background()
	const name = "ns~upd"
	r := fakeHost(name)
	first, err := p.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, p, name, provisioner.StateManageable)
	r.BootMACAddress = "52:54:00:00:00:99"
	r.Architecture = "arm64"
	second, err := p.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if second.RegistrationHash == first.RegistrationHash || second.ID != first.ID {
		t.Errorf("after a change: hash %s -> %s, id %s -> %s", first.RegistrationHash, second.RegistrationHash, first.ID, second.ID)
	}
	var list struct {
		Ports []struct {
			Address string `json:"address"`
		} `json:"ports"`
	}
	if _, err := p.sc.Get(ctx, p.sc.ServiceURL("ports")+"?node="+name, &list, nil); err != nil {
		t.Fatal(err)
	}
	if len(list.Ports) != 1 || list.Ports[0].Address != "52:54:00:00:00:99" {
		t.Errorf("ports after the MAC changed: %+v, want only 52:54:00:00:00:99", list.Ports)
	}
	if err := p.Inspect(ctx, name); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, name, provisioner.StateManageable)
	var hw provisioner.Hardware
	retryBusy(t, "Hardware", func() (err error) { hw, err = p.Hardware(ctx, name); return err })
	if hw.Architecture != "arm64" {
		t.Errorf("architecture after the change: %q, want arm64", hw.Architecture)
	}
}
