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
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Config says which servers to emulate and how their BMC is reached.
type Config struct {
	// StateDir holds a folder per server: disk, console log, media, what its BMC keeps
	// (stateFile), QEMU's socket, pid file and log. An emulator started again on it finds
	// its servers as it left them.
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

	closeOnce sync.Once
	closeErr  error
}

// Start serves the BMC. A server whose QEMU still runs (an earlier emulator on StateDir
// started it) is adopted and On; the others are Off. Each keeps the media and boot override
// its BMC held.
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
	// Absolute: QEMU runs in the server's folder, where a relative path names another
	// file; and a running QEMU is found again by its QMP socket's path as it was spelt.
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
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
		m := newMachine(s, dir, cfg.Accel, runAs.RunAs(), cfg.Forwards, cfg.Logger)
		if err := m.load(); err != nil {
			return nil, fmt.Errorf("bmcemu: %w", err)
		}
		if m.adopt() && m.runningSSHPort != 0 && s.SSHPort != 0 {
			// The running QEMU forwards the port it was started with: that is the server's
			// SSH address (SSHPort) until it is powered off, and its next start keeps it.
			m.spec.SSHPort = m.runningSSHPort
		}
		e.machines[s.Name] = m
		e.names = append(e.names, s.Name)
	}
	sort.Strings(e.names)
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("bmcemu: %w", err)
	}
	e.addr = l.Addr().String()
	e.cfg.Listen = e.addr
	// Each server's serial console on a port of its own, beside the BMC's address.
	host, _, _ := net.SplitHostPort(e.addr)
	for _, name := range e.names {
		m := e.machines[name]
		if m.serial, err = listenSerial(host, m.consoleSocket(), m.log); err != nil {
			l.Close()
			e.closeSerial()
			return nil, fmt.Errorf("bmcemu: server %s's serial console: %w", name, err)
		}
	}
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
func (e *Emulator) Address(name string) string { return Address(e.addr, name) }

// Address is the BMC address of server name behind an emulator serving on listen
// (host:port): for whoever enrols the servers of an emulator running in another process.
func Address(listen, name string) string {
	return "redfish+http://" + listen + "/redfish/v1/Systems/" + name
}

// Config is what the emulator was started with, Listen being the address it serves: Start
// with it after Close is the BMC's restart, at the same address.
func (e *Emulator) Config() Config { return e.cfg }

// SSHPort is the loopback port forwarded to server name's SSH: its Spec's, or, for a server
// adopted while it runs, the one its QEMU was started with. 0 when it has none.
func (e *Emulator) SSHPort(name string) int {
	m := e.machines[name]
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spec.SSHPort
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

// Close stops the BMC. The servers keep running, as a server does while its BMC restarts:
// a new Start on the same StateDir adopts them. PowerOffAll ends them. Closing twice is
// harmless.
func (e *Emulator) Close() error {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := e.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = e.srv.Close()
		}
		e.closeErr = errors.Join(err, <-e.done)
		e.closeSerial()
	})
	return e.closeErr
}

// closeSerial closes the servers' serial consoles, ending their sessions.
func (e *Emulator) closeSerial() {
	for _, m := range e.machines {
		if m.serial != nil {
			m.serial.Close()
		}
	}
}
