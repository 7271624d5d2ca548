package qemu

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/console"
)

// A machine's console is its first serial port (docs/console.md): QEMU listens on the
// machine's console socket and writes every byte the guest sends to console.log, with or
// without a client. Readers follow the log; a writer connects to the socket.

func (r *Runtime) ReadConsoleLog(req *mriv1alpha1.ReadConsoleLogRequest, stream mriv1alpha1.MachineRuntime_ReadConsoleLogServer) error {
	return r.consoles.ReadConsoleLog(req, stream)
}

func (r *Runtime) AttachConsole(stream mriv1alpha1.MachineRuntime_AttachConsoleServer) error {
	return r.consoles.AttachConsole(stream)
}

func (r *Runtime) lookupConsole(id string) (console.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.get(id); err != nil {
		return console.Machine{}, err
	}
	dir := MachineDir(r.cfg.StateDir, id)
	return console.Machine{
		Log: &console.FileLog{Path: filepath.Join(dir, ConsoleLogFile)},
		Gone: func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			_, ok := r.machines[id]
			return !ok
		},
		OpenInput: func(ctx context.Context) (io.WriteCloser, error) { return r.openConsoleInput(ctx, id) },
	}, nil
}

// openConsoleInput connects to a running machine's console socket. QEMU sends the guest's
// output to its client too: that copy is read and dropped (readers have the log), so QEMU
// never waits on a full socket.
func (r *Runtime) openConsoleInput(ctx context.Context, id string) (io.WriteCloser, error) {
	r.mu.Lock()
	m, err := r.get(id)
	running := err == nil && m.rec.Machine.GetStatus().GetState() == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !running {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE, "machine %s is not running: its console takes no input", id)
	}
	path := consoleSocketPath(r.cfg.StateDir, id)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE,
			"machine %s was started by an anvil without interactive consoles: power it off and on to get one (its log can be read)", id)
	}
	dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dialCtx, "unix", path)
	if err != nil {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE, "machine %s's console does not answer (is it starting or stopping?): attach again", id)
	}
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	return conn, nil
}
