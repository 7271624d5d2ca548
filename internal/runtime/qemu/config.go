package qemu

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/netswitch"
	"github.com/anvil-dev/anvil/internal/nocloud"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Images pulls OS images; *osimage.Cache is the real one.
type Images interface {
	// Pull returns the files of arch's entry of the image pinned to digest, as paths the
	// runtime reads but never writes.
	Pull(ctx context.Context, reference, digest string, arch computev1alpha1.Architecture) (osimage.Files, error)
}

// ImageIndex tells which architectures an image offers, cheaply (one manifest read):
// enough to refuse a machine the image cannot boot before the call returns.
// *imageref.Registry is the real one.
type ImageIndex interface {
	Architectures(ctx context.Context, reference string) ([]computev1alpha1.Architecture, error)
}

// SeedWriter writes a NoCloud seed ISO (nocloud.WriteISO).
type SeedWriter func(path string, seed nocloud.Seed) error

// Config shapes a qemu runtime.
type Config struct {
	// Name is reported by Version and starts every machine id.
	Name string
	// StateDir holds one folder per machine; it must survive restarts.
	StateDir string
	// Architectures to offer; each needs its QEMU program installed.
	Architectures []computev1alpha1.Architecture
	// Accel is tcg (the default), kvm or auto; after defaults, the one chosen.
	Accel vm.Accel
	// CPUOvercommit and MemoryOvercommit multiply the host's cpus and memory into what
	// machines may use in total (defaults 4 and 1).
	CPUOvercommit, MemoryOvercommit float64
	// PowerOffGrace is how long a guest has to power off after the ACPI power button
	// before QEMU is told to quit (default 10 s).
	PowerOffGrace time.Duration

	// Networks are the NIC networks with forwards (see Network); ForwardCommand is what
	// QEMU runs per forwarded connection, the target appended (default: `anvil forward`).
	Networks       map[string]Network
	ForwardCommand []string
	// MaxForwardConnections caps how many connections through its forwards one machine
	// holds at once, each a forward process (0: DefaultMaxForwardConnections; negative: no
	// cap, for a ForwardCommand without `anvil forward`'s --machine).
	MaxForwardConnections int
	// Switch connects the NICs of segment networks (Network.Segment). Runtimes of one host
	// share one, so that their VMs share segments; when nil and a network is a segment, the
	// runtime runs its own, with its sockets in StateDir/net.
	Switch *netswitch.Switch

	// QEMUUser is who QEMU drops to (-runas) when the runtime runs as root (default
	// vm.DefaultUser); it must exist. A runtime that is not root starts QEMU as itself.
	QEMUUser string

	Images Images
	Index  ImageIndex
	Seeds  SeedWriter
	Logger logr.Logger

	// accel is Accel resolved, with why the host's architecture is emulated when it is.
	accel vm.Accelerator

	// runAs is QEMUUser resolved, nil when the runtime is not root.
	runAs *vm.User

	// programs maps an architecture to its QEMU program; tests may replace it.
	programs map[computev1alpha1.Architecture]string
}

// maxSocketPath is the longest unix socket path Linux accepts (sun_path less its NUL).
const maxSocketPath = 107

func (c *Config) defaults() error {
	if c.Name == "" {
		c.Name = "qemu"
	}
	if c.Accel == "" {
		c.Accel = vm.AccelTCG
	}
	accel, err := vm.ChooseAccel(context.Background(), c.Accel)
	if err != nil {
		return fmt.Errorf("qemu runtime: %w", err)
	}
	if c.Accel == vm.AccelAuto {
		c.Logger.Info("--accel auto", "using", accel.Accel, "reason", accel.Why)
	}
	c.Accel, c.accel = accel.Accel, accel
	if c.CPUOvercommit == 0 {
		c.CPUOvercommit = 4
	}
	if c.MemoryOvercommit == 0 {
		c.MemoryOvercommit = 1
	}
	if c.CPUOvercommit < 0 || c.MemoryOvercommit < 0 {
		return errors.New("qemu runtime: overcommit ratios must be positive")
	}
	if c.PowerOffGrace == 0 {
		c.PowerOffGrace = 10 * time.Second
	}
	if c.StateDir == "" {
		return errors.New("qemu runtime: a state directory is needed")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return err
	}
	c.StateDir = abs
	// The console socket's name is the longest of a machine's own sockets.
	if n := len(consoleSocketPath(c.StateDir, c.Name+"-"+"000000000000")); n > maxSocketPath {
		return fmt.Errorf("qemu runtime: state directory %s is too long: console socket paths inside it would be %d bytes, Linux allows %d", c.StateDir, n, maxSocketPath)
	}
	if err := checkNetworks(c.Networks); err != nil {
		return err
	}
	if n := len(nicSocket(c.StateDir, c.Name+"-"+"000000000000", "nic9999")); hasSegments(c.Networks) && n > maxSocketPath {
		return fmt.Errorf("qemu runtime: state directory %s is too long: NIC socket paths inside it would be %d bytes, Linux allows %d", c.StateDir, n, maxSocketPath)
	}
	if err := c.resolveForwardCommand(); err != nil {
		return err
	}
	if c.Images == nil || c.Index == nil || c.Seeds == nil {
		return errors.New("qemu runtime: Images, Index and Seeds are needed")
	}
	if len(c.Architectures) == 0 {
		return errors.New("qemu runtime: at least one architecture is needed")
	}
	if c.programs == nil {
		// The pool offers the architectures asked for whose QEMU is installed.
		c.programs = map[computev1alpha1.Architecture]string{}
		var offered []computev1alpha1.Architecture
		for _, a := range c.Architectures {
			p, err := vm.Binary(a)
			if err != nil {
				return fmt.Errorf("qemu runtime: %w", err)
			}
			if _, err := exec.LookPath(p); err != nil {
				c.Logger.Info("architecture not offered: its QEMU is not installed (make deps installs it)", "architecture", a, "program", p)
				continue
			}
			c.programs[a] = p
			offered = append(offered, a)
		}
		if len(offered) == 0 {
			return fmt.Errorf("qemu runtime: none of the QEMU programs for %v is installed (make deps installs them)", c.Architectures)
		}
		c.Architectures = offered
	}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		return errors.New("qemu runtime: qemu-img is not installed (make deps installs it)")
	}
	return nil
}

// resolveForwardCommand resolves QEMU's user (runAs) and ForwardCommand: by default this
// program's `forward`, copied where that user can run it when it cannot reach it here.
func (c *Config) resolveForwardCommand() error {
	var err error
	defaultForward := len(c.Networks) > 0 && len(c.ForwardCommand) == 0
	if defaultForward {
		if c.ForwardCommand, err = forwardCommand(); err != nil {
			return err
		}
	}
	if c.runAs, err = vm.UserForRoot(c.QEMUUser); err != nil {
		return fmt.Errorf("qemu runtime: %w", err)
	}
	if c.runAs != nil && hasForwards(c.Networks) && defaultForward && c.runAs.CannotRun(c.ForwardCommand[0]) != "" {
		// This program where QEMU's user can run it; a command the config names is left as given.
		if c.ForwardCommand[0], err = reachableCopy(c.ForwardCommand[0], forwardCopyDir); err != nil {
			return fmt.Errorf("qemu runtime: a copy of the guest-forward command that user %s can run: %w", c.runAs.Name, err)
		}
	}
	if c.runAs != nil && hasForwards(c.Networks) {
		if why := c.runAs.CannotRun(c.ForwardCommand[0]); why != "" {
			return fmt.Errorf("qemu runtime: QEMU runs the guest-forward command %s as user %s, who cannot: %s", c.ForwardCommand[0], c.runAs.Name, why)
		}
	}
	return nil
}

// AccelAuto chooses kvm when a KVM guest runs on this host, tcg otherwise (vm.ChooseAccel).
const AccelAuto = vm.AccelAuto
