package devproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// QemuProcesses are the QEMU processes whose command line holds s (a machine id, a state
// folder): VMs outlive their runtime by design, so a test finds them this way.
func QemuProcesses(s string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := string(b)
		if strings.HasPrefix(filepath.Base(strings.SplitN(cmd, "\x00", 2)[0]), "qemu-system-") && strings.Contains(cmd, s) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				found = append(found, pid)
			}
		}
	}
	return found
}

// KillQemu kills the QEMU processes whose command line holds s, so a test that stops
// early leaves no VM behind.
func KillQemu(s string) {
	for _, pid := range QemuProcesses(s) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
