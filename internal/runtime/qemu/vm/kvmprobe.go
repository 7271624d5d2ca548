package vm

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ProbeKVM starts program (a qemu-system-* of the host's architecture) with KVM, paused,
// on the board and cpu Board gives for KVM, and quits it over QMP. A /dev/kvm that opens
// is not enough: under nested virtualisation KVM may refuse a vCPU's registers, and QEMU
// then aborts at its first reset, before the monitor answers. It returns nil when QEMU
// came up and quit cleanly.
func ProbeKVM(ctx context.Context, program, machine, cpu string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	args := []string{"-accel", "kvm", "-machine", machine, "-nodefaults", "-no-user-config", "-display", "none",
		"-S", "-m", "64", "-qmp", "stdio"}
	if cpu != "" {
		args = append(args, "-cpu", cpu)
	}
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Stdin = strings.NewReader(`{"execute":"qmp_capabilities"}` + "\n" + `{"execute":"quit"}` + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s with KVM: %w: %s", program, err, lastLine(string(out)))
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}
