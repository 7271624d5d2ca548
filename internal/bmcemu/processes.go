package bmcemu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Servers' QEMUs seen from outside an emulator: by tests and tools, which must tell how many
// run and leave none behind, since servers outlive the emulator.

// ServerProcesses are the pids of the live QEMUs of server name in stateDir (those whose
// command line names its QMP socket, vm.Serves): one while it is on, none while it is off,
// never two.
func ServerProcesses(stateDir, name string) []int {
	stateDir, err := filepath.Abs(stateDir) // as Start spells it in QEMU's command line
	if err != nil {
		return nil
	}
	socket := filepath.Join(stateDir, name, qmpSocketFile)
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && vm.Serves(pid, socket) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// PowerOffAll pulls the plug of every server with a folder in stateDir whose QEMU runs,
// whoever started it: for tests and tools that must leave no server behind once the
// emulator is closed (or its process killed). Not while an emulator serves stateDir: its
// BMC would report the servers off without having been asked.
func PowerOffAll(stateDir string) error {
	stateDir, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, entry := range entries {
		if !entry.IsDir() {
			continue
		}
		socket := filepath.Join(stateDir, entry.Name(), qmpSocketFile)
		for _, pid := range ServerProcesses(stateDir, entry.Name()) {
			// Kill signals only while /proc shows pid is still this server's QEMU.
			if err := (&vm.Process{PID: pid}).Kill(socket, 2*time.Second); err != nil {
				errs = append(errs, fmt.Errorf("server %s: %w", entry.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}
