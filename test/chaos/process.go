package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anvil-dev/anvil/internal/controlplane"
)

// proc is one of anvil's processes under the chaos run: started, killed with SIGKILL and
// started again the way a supervisor (systemd, the kubelet) would, and stopped at the end.
// Each run is internal/controlplane's supervised Process, its output appended to one log.
type proc struct {
	name string
	args []string
	env  []string
	dir  string
	log  string

	mu      sync.Mutex
	running *controlplane.Process
}

func newProc(dir, name string, env []string, args ...string) *proc {
	return &proc{name: name, args: args, env: env, dir: dir, log: filepath.Join(dir, name+".log")}
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	log, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "==== chaos: start %s\n", time.Now().Format(time.RFC3339Nano))
	if err := log.Close(); err != nil {
		return err
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	// Its own process group (the supervisor's): a kill takes what the process started with
	// it only when the process itself would (QEMU outlives a qemu runtime by design; Ironic
	// dies with the metal runtime, its parent, by Pdeathsig).
	running, err := controlplane.StartCommand(p.name, cmd, p.dir, "")
	if err != nil {
		return err
	}
	p.running = running
	return nil
}

// current is the process of the latest start (nil before the first).
func (p *proc) current() *controlplane.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

// pid is the running process's id.
func (p *proc) pid() int { return p.current().PID() }

// kill sends SIGKILL, waits for the process to end, waits restartAfter and starts it again.
func (p *proc) kill(restartAfter time.Duration) error {
	p.current().Kill()
	time.Sleep(restartAfter)
	return p.start()
}

// stop ends the process with SIGTERM, then SIGKILL after 30 s.
func (p *proc) stop() { _ = p.current().Stop(30 * time.Second) }

// exited reports whether the process ended without being killed by the run.
func (p *proc) exited() bool {
	running := p.current()
	return running != nil && running.Exited() != nil
}

// childNamed finds the child of ppid running the program named name (its own path, or a
// script's path after its interpreter): Ironic under the metal runtime.
func childNamed(ppid int, name string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name, which may hold spaces, in parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		for _, a := range args[:min(2, len(args))] {
			if filepath.Base(a) == name {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no child of process %d runs %s", ppid, name)
}
