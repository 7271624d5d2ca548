package qmp

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startQEMU runs a VM with no guest at all, frozen before its first instruction (-S): QMP
// works without one. The process is killed when the test ends.
func startQEMU(t *testing.T) (socket string, cmd *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal("qemu-system-x86_64 is not installed: run make deps")
	}
	socket = filepath.Join(t.TempDir(), "qmp.sock")
	cmd = exec.Command(bin, "-nodefaults", "-no-user-config", "-display", "none", "-S",
		"-machine", "q35", "-accel", "tcg", "-m", "64",
		"-device", "pcie-root-port,id=rp0,chassis=1",
		"-qmp", "unix:"+socket+",server=on,wait=off")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			return socket, cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("QEMU never created its QMP socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func nextEvent(t *testing.T, c *Client, name string) Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("events ended before %s", name)
			}
			if ev.Name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", name)
		}
	}
}

func TestRealQEMU(t *testing.T) {
	socket, _ := startQEMU(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version().Major < 7 {
		t.Errorf("QEMU %s: the runtime needs 7.0 or later", c.Version())
	}

	st, err := c.QueryStatus(ctx)
	if err != nil || st.Status != "prelaunch" || st.Running {
		t.Fatalf("before cont: %+v %v", st, err)
	}
	if err := c.Execute(ctx, "cont", nil, nil); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, c, "RESUME")
	if st, err := c.QueryStatus(ctx); err != nil || !st.Running {
		t.Fatalf("after cont: %+v %v", st, err)
	}

	// A second client is not served while this one is connected.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	if other, err := Dial(short, socket); err == nil {
		other.Close()
		t.Error("a second QMP client was greeted while the first is connected")
	}
	cancelShort()

	// Hotplug a NIC into the root port.
	if err := c.Execute(ctx, "netdev_add", map[string]any{"type": "user", "id": "net1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Execute(ctx, "device_add", map[string]any{"driver": "virtio-net-pci", "netdev": "net1", "id": "nic1", "bus": "rp0"}, nil); err != nil {
		t.Fatal(err)
	}
	var qe *Error
	err = c.Execute(ctx, "device_add", map[string]any{"driver": "virtio-net-pci", "netdev": "net1", "id": "nic1", "bus": "rp0"}, nil)
	if !errors.As(err, &qe) {
		t.Fatalf("adding a duplicate device: %v, want a QMP error", err)
	}

	if err := c.Execute(ctx, "system_reset", nil, nil); err != nil {
		t.Fatal(err)
	}
	nextEvent(t, c, "RESET")

	if err := c.Quit(ctx); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, c, "SHUTDOWN")
	if len(ev.Data) == 0 {
		t.Error("SHUTDOWN without data")
	}
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the connection outlived QEMU")
	}
}
