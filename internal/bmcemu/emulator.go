package bmcemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-logr/logr"

	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Config says which servers to emulate and how their BMC is reached.
type Config struct {
	// StateDir holds a folder per server: disk, console log, media, QEMU's socket and log.
	StateDir string
	// Listen is the BMC's address (default 127.0.0.1:0, a free port).
	Listen string
	// Username and Password are the only credentials the BMC accepts.
	Username, Password string
	Servers            []Spec
	// Accel is QEMU's accelerator: tcg (default), kvm, or auto (kvm when a KVM guest runs
	// on this host: vm.ChooseAccel, as the qemu runtime chooses).
	Accel vm.Accel
	// QEMUUser is who the servers' QEMU drops to when the emulator runs as root (default
	// vm.DefaultUser); it must exist.
	QEMUUser string
	// Forwards stand for the site network's routes from the servers to services beside
	// them (a workload cluster's apiserver the servers join as Nodes, say): every server's
	// NIC gets them as QEMU guestfwd entries and stays restrict=on, so its OS reaches
	// those services at their guest addresses (10.0.2.0/24) and nothing else of the host.
	// qemu.GuestForwards makes them as the qemu runtime does for its networks; each
	// Command must be one QEMUUser can run (qemu.ReachableForwardCommand).
	Forwards []vm.Forward
	Logger   logr.Logger
}

// Emulator is a running BMC and its servers.
type Emulator struct {
	cfg      Config
	machines map[string]*machine
	names    []string
	srv      *http.Server
	addr     string
	done     chan error
}

// Start serves the BMC. Servers start powered off.
func Start(cfg Config) (*Emulator, error) {
	if cfg.Username == "" || cfg.Password == "" {
		return nil, errors.New("bmcemu: a username and password are needed")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Accel == "" {
		cfg.Accel = vm.AccelTCG
	}
	accel, err := vm.ChooseAccel(context.Background(), cfg.Accel)
	if err != nil {
		return nil, fmt.Errorf("bmcemu: %w", err)
	}
	if cfg.Accel == vm.AccelAuto {
		cfg.Logger.Info("accelerator auto", "using", accel.Accel, "reason", accel.Why)
	}
	cfg.Accel = accel.Accel
	runAs, err := vm.UserForRoot(cfg.QEMUUser)
	if err != nil {
		return nil, fmt.Errorf("bmcemu: %w", err)
	}
	for _, f := range cfg.Forwards {
		if err := checkForward(f); err != nil {
			return nil, err
		}
	}
	e := &Emulator{cfg: cfg, machines: map[string]*machine{}, done: make(chan error, 1)}
	for _, s := range cfg.Servers {
		if err := s.validate(); err != nil {
			return nil, err
		}
		if e.machines[s.Name] != nil {
			return nil, fmt.Errorf("bmcemu: two servers are named %s", s.Name)
		}
		dir := filepath.Join(cfg.StateDir, s.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		e.machines[s.Name] = newMachine(s, dir, cfg.Accel, runAs.RunAs(), cfg.Forwards, cfg.Logger)
		e.names = append(e.names, s.Name)
	}
	sort.Strings(e.names)
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("bmcemu: %w", err)
	}
	e.addr = l.Addr().String()
	e.srv = &http.Server{Handler: e.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		err := e.srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		e.done <- err
	}()
	return e, nil
}

// Address is the redfish+http:// BMC address of server name, as a Host's spec.bmc.address.
func (e *Emulator) Address(name string) string {
	return "redfish+http://" + e.addr + "/redfish/v1/Systems/" + name
}

// ConsolePath is the file server name's serial console is written to.
func (e *Emulator) ConsolePath(name string) string {
	if m := e.machines[name]; m != nil {
		return m.consolePath()
	}
	return ""
}

// DataDiskPath is the file of server name's second disk (Spec.DataDiskMiB), "" when the
// server has none. Read it while the server is off: QEMU writes it while it runs.
func (e *Emulator) DataDiskPath(name string) string {
	if m := e.machines[name]; m != nil && m.spec.DataDiskMiB > 0 {
		return m.dataDiskPath()
	}
	return ""
}

// InsertedMedia lists the virtual media slots of server name that hold a medium.
func (e *Emulator) InsertedMedia(name string) []string {
	m := e.machines[name]
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var slots []string
	for _, slot := range []string{slotCd, slotUSB} {
		if m.media[slot] != "" {
			slots = append(slots, slot)
		}
	}
	return slots
}

// Close stops the BMC and pulls every server's plug.
func (e *Emulator) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = e.srv.Close()
	}
	err = errors.Join(err, <-e.done)
	for _, name := range e.names {
		m := e.machines[name]
		m.mu.Lock()
		err = errors.Join(err, m.powerOff(context.Background(), true))
		m.mu.Unlock()
	}
	return err
}
