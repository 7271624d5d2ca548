package bmcemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/anvil-dev/anvil/internal/runtime/qemu/qmp"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Virtual media slots of a server's Manager.
const (
	slotCd  = "Cd"
	slotUSB = "UsbStick"
)

// machine is one emulated server: its files, its QEMU process, and what its BMC holds
// (media, boot override). The mutex serialises every BMC action on it.
type machine struct {
	spec  Spec
	dir   string
	accel vm.Accel
	runAs string // QEMU's -runas, "" to stay the emulator's user
	// forwards are the site network's routes (Config.Forwards).
	forwards []vm.Forward
	log      logr.Logger

	mu sync.Mutex
	// proc is the server's QEMU: started by this emulator, or adopted from an earlier one.
	proc *vm.Process
	// media holds, per slot, the URL of the inserted image; its file is mediaPath(slot).
	media map[string]string
	// override is the boot source override: target and Disabled, Once or Continuous.
	override, overrideEnabled string
	// runningSSHPort is the SSH port the QEMU last started was given (stateFile keeps it).
	runningSSHPort int
	// serial is the server's serial console as its BMC serves it (nil until Start opens it).
	serial *serialPort
}

func newMachine(s Spec, dir string, accel vm.Accel, runAs string, forwards []vm.Forward, log logr.Logger) *machine {
	return &machine{spec: s, dir: dir, accel: accel, runAs: runAs, forwards: forwards, log: log.WithValues("server", s.Name),
		media: map[string]string{}, override: targetNone, overrideEnabled: "Disabled"}
}

// The files in a server's folder by which its QEMU is found again (vm.Find).
const (
	qmpSocketFile = "qmp.sock"
	pidFileName   = "qemu.pid"
)

func (m *machine) path(name string) string      { return filepath.Join(m.dir, name) }
func (m *machine) qmpSocket() string            { return m.path(qmpSocketFile) }
func (m *machine) pidFile() string              { return m.path(pidFileName) }
func (m *machine) consolePath() string          { return m.path("console.log") }
func (m *machine) consoleSocket() string        { return m.path(consoleSocketFile) }
func (m *machine) dataDiskPath() string         { return m.path("data.raw") }
func (m *machine) mediaPath(slot string) string { return m.path("media-" + slot) }

// createSparse makes a sparse file of size bytes at path unless one is there.
func createSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// on reports whether the server's QEMU runs. Called with mu held.
func (m *machine) on() bool { return m.proc != nil && m.proc.Alive(m.qmpSocket()) }

// adopt finds the server's QEMU when it runs without this emulator having started it: an
// earlier emulator's, which outlived it as a server outlives its BMC's restart. As the qemu
// runtime adopts VMs: the pid file, checked against /proc, else any QEMU serving the
// server's QMP socket. It reports whether one runs. Called with mu held.
func (m *machine) adopt() bool {
	p, ok := vm.Find(m.pidFile(), m.qmpSocket())
	if !ok {
		return false
	}
	m.proc = p
	m.log.Info("adopted the running server", "pid", p.PID)
	return true
}

// powerOn starts QEMU unless it runs (also when started by an earlier emulator: a server
// has one QEMU, and a live QEMU's socket is never removed). A Once override is spent by
// this start.
func (m *machine) powerOn(ctx context.Context) error {
	if m.on() || m.adopt() {
		return nil
	}
	disk := m.path("disk.qcow2")
	if _, err := os.Stat(disk); errors.Is(err, os.ErrNotExist) {
		if err := vm.CreateEmpty(ctx, disk, m.spec.DiskGiB<<30); err != nil {
			return err
		}
	}
	l := launch{disk: disk, console: m.consolePath(), consoleSocket: m.consoleSocket(), qmp: m.qmpSocket(), pidFile: m.pidFile(),
		bootCd: m.overrideEnabled != "Disabled" && m.override == targetCd, runAs: m.runAs, forwards: m.forwards}
	if m.spec.DataDiskMiB > 0 {
		l.data = m.dataDiskPath()
		if err := createSparse(l.data, m.spec.DataDiskMiB<<20); err != nil {
			return fmt.Errorf("the server's data disk: %w", err)
		}
	}
	if m.spec.BootMode() == bootUEFI {
		l.vars = m.path("efivars.fd")
		if err := copyOnce(uefiFirmware[m.spec.arch()].vars, l.vars); err != nil {
			return fmt.Errorf("the server's UEFI variable store (packages ovmf, qemu-efi-aarch64): %w", err)
		}
	}
	if m.media[slotCd] != "" {
		l.cd = m.mediaPath(slotCd)
	}
	if m.media[slotUSB] != "" {
		l.usb = m.mediaPath(slotUSB)
	}
	// No QEMU serves the sockets (adopt found none): a stale one would fail the bind.
	_ = os.Remove(m.qmpSocket())
	_ = os.Remove(m.consoleSocket())
	program, err := vm.Binary(m.spec.arch())
	if err != nil {
		return err
	}
	args, err := qemuArgs(m.spec, l, m.accel)
	if err != nil {
		return err
	}
	p, err := vm.Launch(program, args, m.path("qemu.log"))
	if err != nil {
		return err
	}
	m.proc = p
	if err := m.awaitStart(ctx, p); err != nil {
		return err
	}
	if m.overrideEnabled == "Once" {
		m.overrideEnabled, m.override = "Disabled", targetNone
	}
	m.runningSSHPort = m.spec.SSHPort
	m.log.Info("powered on", "pid", p.PID, "bootCd", l.bootCd, "cd", m.media[slotCd], "usb", m.media[slotUSB])
	if err := m.save(); err != nil {
		// The server is on, as asked; only a later emulator may see the Once override unspent.
		m.log.Error(err, "the BMC's state after power-on not saved")
	}
	return nil
}

// awaitStart returns once the new QEMU answers on its QMP socket, so a server reported
// On after Reset On is on (a BMC's power-on is done when the action returns); a QEMU that
// exits first is an error with the end of its log.
func (m *machine) awaitStart(ctx context.Context, p *vm.Process) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.Exited():
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := dialQMP(ctx, m.qmpSocket())
	if err == nil {
		c.Close()
		return nil
	}
	log, _ := os.ReadFile(m.path("qemu.log"))
	if len(log) > 2000 {
		log = log[len(log)-2000:]
	}
	return fmt.Errorf("the server's QEMU did not start (%w): %s", err, log)
}

// powerOff pulls the plug (force) or presses the power button (the guest decides).
func (m *machine) powerOff(ctx context.Context, force bool) error {
	if !m.on() {
		return nil
	}
	if !force {
		return m.qmp(ctx, "system_powerdown", nil)
	}
	m.log.Info("powered off", "pid", m.proc.PID)
	return m.proc.Kill(m.qmpSocket(), 2*time.Second)
}

// restart is a cold restart, so a boot override set since the last start applies.
func (m *machine) restart(ctx context.Context) error {
	if err := m.powerOff(ctx, true); err != nil {
		return err
	}
	return m.powerOn(ctx)
}

// qmp runs one command on the running QEMU.
func (m *machine) qmp(ctx context.Context, command string, args any) error {
	return m.withQMP(ctx, func(ctx context.Context, c *qmp.Client) error { return c.Execute(ctx, command, args, nil) })
}

// withQMP runs do on a connection to the running QEMU, within 10 s.
func (m *machine) withQMP(ctx context.Context, do func(context.Context, *qmp.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := dialQMP(ctx, m.qmpSocket())
	if err != nil {
		return err
	}
	defer c.Close()
	return do(ctx, c)
}

// dialQMP connects to a QEMU that may have been started a moment ago and not yet opened
// its socket.
func dialQMP(ctx context.Context, socket string) (*qmp.Client, error) {
	for {
		c, err := qmp.Dial(ctx, socket)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("QMP %s: %w", socket, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// insert downloads url into slot's file and, for the CD-ROM of a running server, loads it
// into the drive through QMP. A USB stick inserted while the server runs appears at its
// next start.
func (m *machine) insert(ctx context.Context, slot, url string) error {
	if m.media[slot] != "" {
		return errInserted
	}
	if err := download(ctx, url, m.mediaPath(slot)); err != nil {
		return err
	}
	m.media[slot] = url
	if err := m.save(); err != nil {
		delete(m.media, slot)
		return err
	}
	if slot == slotCd && m.on() {
		return m.changeMedium(ctx, m.mediaPath(slot))
	}
	return nil
}

// changeMedium loads path into the running CD-ROM. QEMU gets the file as a descriptor
// (an fd set): it has dropped to its unprivileged user and cannot open the emulator's
// files by path.
func (m *machine) changeMedium(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return m.withQMP(ctx, func(ctx context.Context, c *qmp.Client) error {
		var set struct {
			FDSetID int `json:"fdset-id"`
		}
		if err := c.ExecuteWithFile(ctx, "add-fd", map[string]any{"opaque": "cd"}, &set, f); err != nil {
			return err
		}
		// QEMU keeps the copy the medium uses; the set itself goes.
		defer c.Execute(ctx, "remove-fd", map[string]any{"fdset-id": set.FDSetID}, nil) //nolint:errcheck
		return c.Execute(ctx, "blockdev-change-medium", map[string]any{
			"id": "cd", "filename": fmt.Sprintf("/dev/fdset/%d", set.FDSetID), "format": "raw", "read-only-mode": "read-only"}, nil)
	})
}

// eject empties slot, opening the running CD-ROM's tray first.
func (m *machine) eject(ctx context.Context, slot string) error {
	if m.media[slot] == "" {
		return nil
	}
	if slot == slotCd && m.on() {
		if err := m.qmp(ctx, "eject", map[string]any{"id": "cd", "force": true}); err != nil {
			return err
		}
	}
	url := m.media[slot]
	delete(m.media, slot)
	if err := m.save(); err != nil {
		m.media[slot] = url
		return err
	}
	return os.Remove(m.mediaPath(slot))
}

// copyOnce copies src to dst unless dst exists: a server's NVRAM starts as the firmware's
// template and then keeps what the firmware writes.
func copyOnce(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".new"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// errInserted: Redfish asks for an eject before another insert.
var errInserted = errors.New("a medium is already inserted: eject it first")

// download fetches url into path, replacing it only once the whole body arrived.
func download(ctx context.Context, url, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("image URL %q: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("downloading %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading %s: %s", url, resp.Status)
	}
	tmp := path + ".part"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("downloading %s: %w", url, err)
	}
	return os.Rename(tmp, path)
}
