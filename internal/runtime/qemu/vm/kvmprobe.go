package vm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// ProbeDeadline is how long ProbeKVM waits for its guest's line. A guest that runs writes
// it within milliseconds of QEMU's start; the rest is QEMU starting on a busy host.
const ProbeDeadline = 10 * time.Second

// probeMarker is the line the probe's guest writes to its serial port.
const probeMarker = "ANVIL-KVM-PROBE-OK"

// ProbeKVM proves that program (the qemu-system-* of arch, the host's architecture) runs a
// guest under KVM: it boots a firmware of a few instructions that writes probeMarker to the
// serial port and halts, and waits for the line. A /dev/kvm that opens, or a QEMU that
// starts with -accel kvm, is not enough: on some hosts (nested virtualisation) QEMU aborts
// at the first vCPU reset, on others it starts and its guests never execute an instruction.
func ProbeKVM(ctx context.Context, program string, arch computev1alpha1.Architecture) error {
	return probeGuest(ctx, program, arch, AccelKVM, ProbeDeadline)
}

// probeGuest boots the probe firmware of arch with accel and returns nil once its line is
// on the serial port, an error saying what QEMU did otherwise.
func probeGuest(ctx context.Context, program string, arch computev1alpha1.Architecture, accel Accel, within time.Duration) error {
	firmware, err := probeFirmware(arch)
	if err != nil {
		return err
	}
	machine, cpu, err := Board(arch, accel, 1)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "anvil-accel-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bios := filepath.Join(dir, "probe.bin")
	if err := os.WriteFile(bios, firmware, 0o644); err != nil {
		return err
	}
	args := []string{"-accel", string(accel), "-machine", machine, "-nodefaults", "-no-user-config",
		"-display", "none", "-m", "64", "-bios", bios, "-serial", "stdio"}
	if cpu != "" {
		args = append(args, "-cpu", cpu)
	}

	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	// Its own process group, killed whole: a wrapper's children go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	serial := &markerWriter{marker: []byte(probeMarker), seen: make(chan struct{})}
	var stderr tailWriter
	cmd.Stdout, cmd.Stderr = serial, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s with %s: %w", program, accel, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-serial.seen:
		cancel()
		<-exited
		return nil
	case err := <-exited:
		if serial.found() {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s with %s started, but its guest showed no sign of running within %s (no line on its serial port)", program, accel, within)
		}
		if err == nil {
			err = errors.New("exited")
		}
		return fmt.Errorf("%s with %s: %w before its guest wrote a line: %s", program, accel, err, lastLine(stderr.String()))
	}
}

// probeFirmware is a firmware image for arch's board that writes probeMarker and a newline
// to the first serial port, then halts.
func probeFirmware(arch computev1alpha1.Architecture) ([]byte, error) {
	msg := probeMarker + "\n\x00"
	switch arch {
	case computev1alpha1.ArchitectureAMD64:
		// A PC BIOS: 64 KiB (QEMU takes whole 64 KiB units), entered in real mode at its last
		// 16 bytes (F000:FFF0), which jump to its first byte (F000:0000).
		rom := make([]byte, 64<<10)
		code := []byte{
			0x8c, 0xc8, // mov ax, cs
			0x8e, 0xd8, // mov ds, ax
			0xbe, 0x20, 0x00, // mov si, 0x0020 (msg)
			0xba, 0xf8, 0x03, // mov dx, 0x3f8 (COM1's data register)
			0xac,       // 0x0a: lodsb
			0x84, 0xc0, // test al, al
			0x74, 0x03, // jz 0x12
			0xee,       // out dx, al
			0xeb, 0xf8, // jmp 0x0a
			0xf4,       // 0x12: hlt
			0xeb, 0xfd, // jmp 0x12
		}
		copy(rom, code)
		copy(rom[0x20:], msg)
		copy(rom[0xfff0:], []byte{0xea, 0x00, 0x00, 0x00, 0xf0}) // jmp far F000:0000
		return rom, nil
	case computev1alpha1.ArchitectureARM64:
		// The virt board's flash at address 0, where the first vCPU starts (EL1, MMU off);
		// its PL011 UART is at 0x09000000.
		words := []uint32{
			0xd2a12001, // 0x00: movz x1, #0x0900, lsl #16
			0x52806022, // 0x04: movz w2, #0x301 (UARTEN | TXE | RXE)
			0xb9003022, // 0x08: str w2, [x1, #0x30] (UARTCR)
			0x100000e3, // 0x0c: adr x3, 0x28 (msg)
			0x38401460, // 0x10: ldrb w0, [x3], #1
			0x34000060, // 0x14: cbz w0, 0x20
			0x39000020, // 0x18: strb w0, [x1] (UARTDR)
			0x17fffffd, // 0x1c: b 0x10
			0xd503207f, // 0x20: wfi
			0x17ffffff, // 0x24: b 0x20
		}
		out := make([]byte, 0, 4*len(words)+len(msg))
		for _, w := range words {
			out = binary.LittleEndian.AppendUint32(out, w)
		}
		return append(out, msg...), nil
	}
	return nil, fmt.Errorf("no accelerator probe is known for architecture %q", arch)
}

// markerWriter closes seen the first time marker has been written to it.
type markerWriter struct {
	marker []byte
	seen   chan struct{}
	mu     sync.Mutex
	tail   []byte
	done   bool
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	w.tail = append(w.tail, p...)
	if bytes.Contains(w.tail, w.marker) {
		w.done = true
		close(w.seen)
		return len(p), nil
	}
	// Only a marker split across writes needs what came before.
	if keep := len(w.marker) - 1; len(w.tail) > keep {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-keep:]...)
	}
	return len(p), nil
}

func (w *markerWriter) found() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// tailWriter keeps the last 4 KiB written to it: enough for QEMU's last error line.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - 4096; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// lastLine is the last line of s, at most 300 bytes of it: it ends up in a pool's status.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
