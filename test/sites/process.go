package sites

import (
	"os"
	"os/exec"
	"time"

	"github.com/anvil-dev/anvil/internal/controlplane"
)

// stopGrace is how long a process has to end after SIGTERM before it is killed.
const stopGrace = 20 * time.Second

// proc is one of anvil's processes in a hierarchy, its output in <dir>/<name>.log.
type proc struct {
	name string
	*controlplane.Process
}

// startProc starts bin with args, KUBECONFIG set to kubeconfig when not empty, under
// internal/controlplane's supervisor: the child dies with this process (Pdeathsig), so an
// aborted test leaves nothing running.
func startProc(dir, name, kubeconfig, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	p, err := controlplane.StartCommand(name, cmd, dir, "")
	if err != nil {
		return nil, err
	}
	return &proc{name: name, Process: p}, nil
}
