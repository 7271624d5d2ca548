package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/test/testos"
)

// bench creates Machines through the API and watches their consoles.
type bench struct {
	c     client.Client
	image string
	arch  computev1alpha1.Architecture
	state string // the pool's state folder (dev.StartQemuPool's): where consoles are read
	// kept is the Machine left powered off after the last round; argv and dir are its
	// QEMU command line and folder, for the by-hand starts.
	kept string
	argv []string
	dir  string
}

const limit = 5 * time.Minute

func (b *bench) setup(ctx context.Context) error {
	for _, obj := range []client.Object{class(), userData("bench-user-data")} {
		if err := b.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func (b *bench) marker() string { return testos.ReadyLine(b.arch, "bench", "bench") }

// createToMarker creates a Machine and returns the seconds until its console shows the
// marker. A kept Machine is powered off instead of deleted, its QEMU command line saved.
func (b *bench) createToMarker(ctx context.Context, name string, keep bool) (float64, error) {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "bench-vm"},
			Architecture: b.arch, Image: b.image, UserDataRef: &computev1alpha1.SecretKeySelector{Name: "bench-user-data"}}}
	start := time.Now()
	if err := b.c.Create(ctx, m); err != nil {
		return 0, err
	}
	id, err := b.await(ctx, name, func(m *computev1alpha1.Machine) (string, bool) { return m.Status.MachineID, m.Status.MachineID != "" })
	if err != nil {
		return 0, err
	}
	console := filepath.Join(dev.QemuMachineDir(b.state, b.arch, id), qemu.ConsoleLogFile)
	if err := waitLine(console, b.marker(), 1); err != nil {
		return 0, err
	}
	secs := time.Since(start).Seconds()
	if !keep {
		return secs, b.deleteMachine(ctx, name)
	}
	b.kept, b.dir = name, filepath.Dir(console)
	if b.argv, err = commandLineUsing(b.dir); err != nil {
		return 0, err
	}
	if err := b.c.Patch(ctx, m, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"power":"Off"}}`))); err != nil {
		return 0, err
	}
	_, err = b.await(ctx, name, func(m *computev1alpha1.Machine) (string, bool) {
		return "", m.Status.State == computev1alpha1.MachineStateShutdown
	})
	return secs, err
}

func (b *bench) deleteMachine(ctx context.Context, name string) error {
	m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := b.c.Delete(ctx, m); err != nil {
		return err
	}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(m), m); apierrors.IsNotFound(err) {
			return nil
		}
	}
	return fmt.Errorf("machine %s not gone after %s", name, limit)
}

// await polls the Machine until cond holds, returning cond's value.
func (b *bench) await(ctx context.Context, name string, cond func(*computev1alpha1.Machine) (string, bool)) (string, error) {
	m := &computev1alpha1.Machine{}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
			return "", err
		}
		if v, ok := cond(m); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("machine %s: %w after %s; status %+v", name, errTimeout, limit, m.Status)
}

// byHand copies the kept machine's files to dir and starts its QEMU command line there
// directly, returning the seconds until the marker.
func (b *bench) byHand(ctx context.Context, dir string) (float64, error) {
	if err := copyFiles(b.dir, dir); err != nil {
		return 0, err
	}
	argv := make([]string, len(b.argv))
	for i, a := range b.argv {
		argv[i] = strings.ReplaceAll(a, b.dir, dir)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := waitLine(filepath.Join(dir, "console.log"), b.marker(), 1); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// commandLineUsing is the exact argv of the QEMU process whose command line names dir.
func commandLineUsing(dir string) ([]string, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(raw), dir) {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if strings.HasPrefix(filepath.Base(argv[0]), "qemu-system-") {
			return argv, nil
		}
	}
	return nil, fmt.Errorf("no QEMU process uses %s", dir)
}

// copyFiles copies the regular files of the machine's folder (disks, seed), leaving out
// what belongs to the running instance: its console, log, pid file and sockets.
func copyFiles(from, to string) error {
	return filepath.Walk(from, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		switch {
		case info.IsDir():
			return os.MkdirAll(target, 0o700)
		case !info.Mode().IsRegular(), strings.HasSuffix(path, ".log"), strings.HasSuffix(path, ".pid"):
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(dst, src); err != nil {
			dst.Close()
			return err
		}
		return dst.Close()
	})
}

// waitLine waits until the file holds line n times.
func waitLine(path, line string, n int) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		raw, _ := os.ReadFile(path)
		if strings.Count(string(raw), line) >= n {
			return nil
		}
	}
	return fmt.Errorf("%s never showed %q: %w", path, line, errTimeout)
}
