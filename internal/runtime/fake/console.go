package fake

import (
	"context"
	"io"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/console"
)

// consoleLimit is how much of each fake machine's console is kept, in memory: a fake pool
// may hold thousands of machines.
const consoleLimit = 64 << 10

// A fake machine's console: a line each time it starts running, and what a writer types
// echoed back, as a terminal echoes. It is kept in memory, so a restart of the runtime
// starts it again empty (CONTRACT.md C6 is a SHOULD).

// consoleLocked returns machine id's console log, made on first use. mu must be held.
func (r *Runtime) consoleLocked(id string) *console.MemoryLog {
	if r.consoles == nil {
		r.consoles = map[string]*console.MemoryLog{}
	}
	log, ok := r.consoles[id]
	if !ok {
		log = console.NewMemoryLog(consoleLimit)
		r.consoles[id] = log
	}
	return log
}

func (r *Runtime) lookupConsole(id string) (console.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.get(id); err != nil {
		return console.Machine{}, err
	}
	log := r.consoleLocked(id)
	return console.Machine{
		Log: log,
		Gone: func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			_, ok := r.machines[id]
			return !ok
		},
		OpenInput: func(context.Context) (io.WriteCloser, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			m, err := r.get(id)
			if err != nil {
				return nil, err
			}
			if m.Status.GetState() != mriv1alpha1.MachineState_MACHINE_STATE_RUNNING {
				return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE, "machine %s is not running: its console takes no input", id)
			}
			return echo{log}, nil
		},
	}, nil
}

// echo is a fake console's input: what is typed appears in its output.
type echo struct{ log *console.MemoryLog }

func (e echo) Write(p []byte) (int, error) { return e.log.Write(p) }
func (echo) Close() error                  { return nil }

func (r *Runtime) ReadConsoleLog(req *mriv1alpha1.ReadConsoleLogRequest, stream mriv1alpha1.MachineRuntime_ReadConsoleLogServer) error {
	return r.consoleServer.ReadConsoleLog(req, stream)
}

func (r *Runtime) AttachConsole(stream mriv1alpha1.MachineRuntime_AttachConsoleServer) error {
	return r.consoleServer.AttachConsole(stream)
}
