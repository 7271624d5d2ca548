package buildagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/anvil-dev/anvil/internal/imagebuild/containerfile"
)

// defaultPath is RUN's PATH when the recipe sets none, as in Docker.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// StepError is a build operation that failed: the step's words are what the user reads.
type StepError struct {
	Step containerfile.Step
	Err  error
}

func (e *StepError) Error() string {
	where := "line"
	if e.Step.File != "" {
		where = e.Step.File + " containerfile, line"
	}
	return fmt.Sprintf("%s %d: %s: %v", where, e.Step.Line, e.Step.Original, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// execute runs prog's operations in root, writing what RUN prints to log; RUN steps also
// get env where the recipe sets no such variable. A failed operation is a *StepError.
func execute(ctx context.Context, root string, prog containerfile.Program, context map[string][]byte, env []string, log io.Writer) error {
	unmount, err := mountKernelFilesystems(root)
	if err != nil {
		return err
	}
	defer unmount()
	for _, op := range prog.Ops {
		say(log, "--> %s", op.Step.Original)
		var err error
		switch op.Kind {
		case containerfile.OpRun:
			err = run(ctx, root, op, env, log)
		case containerfile.OpCopy:
			for _, c := range op.Copies {
				data, ok := context[c.From]
				if !ok {
					err = fmt.Errorf("context file %s is not in the job", c.From)
					break
				}
				if err = writeInRoot(root, c.To, data); err != nil {
					break
				}
			}
		case containerfile.OpWorkdir:
			err = mkdirInRoot(root, op.Dir)
		default:
			err = fmt.Errorf("unknown operation %d", op.Kind)
		}
		if err != nil {
			return &StepError{Step: op.Step, Err: err}
		}
	}
	return nil
}

func run(ctx context.Context, root string, op containerfile.Op, extra []string, log io.Writer) error {
	if err := mkdirInRoot(root, op.Dir); err != nil {
		return err
	}
	prog := op.Argv[0]
	if !strings.Contains(prog, "/") {
		// Looked up on the recipe's PATH inside the root, never on the agent's own.
		found, ok := lookPathInRoot(root, op.Env, prog)
		if !ok {
			return fmt.Errorf("%s: command not found in the image", prog)
		}
		prog = found
	}
	cmd := exec.CommandContext(ctx, prog, op.Argv[1:]...)
	cmd.Args[0] = op.Argv[0]
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Setpgid: true}
	cmd.Dir = op.Dir
	cmd.Env = withDefaults(op.Env, append([]string{defaultPath}, extra...))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("exited with status %d", exit.ExitCode())
		}
		return err
	}
	return nil
}

// withDefaults is env with each of defaults whose name env does not set.
func withDefaults(env, defaults []string) []string {
	out := append([]string(nil), env...)
	for _, d := range defaults {
		name, _, _ := strings.Cut(d, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
			out = append(out, d)
		}
	}
	return out
}

// lookPathInRoot finds an exec-form program's path on the recipe's PATH inside root.
func lookPathInRoot(root string, env []string, name string) (string, bool) {
	p := strings.TrimPrefix(defaultPath, "PATH=")
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			p = v
		}
	}
	for _, dir := range filepath.SplitList(p) {
		candidate := path.Join(dir, name)
		if host, err := resolveInRoot(root, candidate); err == nil {
			if fi, err := os.Stat(host); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return candidate, true
			}
		}
	}
	return "", false
}

// mountKernelFilesystems gives RUN steps /proc, /dev (with a /dev/pts of their own, where
// apt keeps its terminal log) and /sys, where the root has those folders, and returns what
// takes them away again before the root is packed.
func mountKernelFilesystems(root string) (func(), error) {
	var mounted []string
	undo := func() {
		for i := len(mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(mounted[i], unix.MNT_DETACH)
		}
	}
	for _, m := range []struct{ dir, fstype, source, data string }{
		{"proc", "proc", "proc", ""},
		{"dev", "devtmpfs", "devtmpfs", ""},
		{"dev/pts", "devpts", "devpts", "newinstance,ptmxmode=0666,mode=0620"},
		{"sys", "sysfs", "sysfs", ""},
	} {
		target := filepath.Join(root, m.dir)
		if m.dir == "dev/pts" {
			if !slices.Contains(mounted, filepath.Join(root, "dev")) {
				continue
			}
			// In the kernel's devtmpfs, not in the root.
			if err := os.MkdirAll(target, 0o755); err != nil {
				undo()
				return nil, fmt.Errorf("making /dev/pts for RUN: %w", err)
			}
		}
		if fi, err := os.Lstat(target); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount(m.source, target, m.fstype, 0, m.data); err != nil {
			undo()
			return nil, fmt.Errorf("mounting /%s for RUN: %w", m.dir, err)
		}
		mounted = append(mounted, target)
	}
	return undo, nil
}

// resolveInRoot maps an absolute path inside root to a host path, following symbolic links
// the way the chrooted root would see them, and never leaving root.
func resolveInRoot(root, p string) (string, error) {
	parts := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for links := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, part)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = next // missing or not a link: later parts are created below it
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		dest, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if !path.IsAbs(dest) {
			dest = path.Join(cur, dest)
		}
		parts = append(strings.Split(strings.Trim(path.Clean(dest), "/"), "/"), parts...)
		cur = "/"
	}
	return filepath.Join(root, cur), nil
}

func mkdirInRoot(root, dir string) error {
	host, err := resolveInRoot(root, dir)
	if err != nil {
		return err
	}
	return os.MkdirAll(host, 0o755)
}

// writeInRoot writes a COPY's file, replacing (never following) a link at the destination.
func writeInRoot(root, to string, data []byte) error {
	parent, err := resolveInRoot(root, path.Dir(to))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	target := filepath.Join(parent, path.Base(to))
	if fi, err := os.Lstat(target); err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory", to)
		}
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	if err := os.WriteFile(target, data, 0o644); err != nil {
		return err
	}
	if err := os.Chown(target, 0, 0); err != nil {
		return err
	}
	return os.Chmod(target, 0o644)
}
