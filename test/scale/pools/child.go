package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/anvil-dev/anvil/internal/controlplane"
)

// child is a process of the scenario whose peak memory is reported, run under
// internal/controlplane's supervisor.
type child struct {
	*controlplane.Process
}

func startChild(dir, name, kubeconfig, bin string, args ...string) (*child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	p, err := controlplane.StartCommand(name, cmd, dir, "")
	if err != nil {
		return nil, err
	}
	return &child{p}, nil
}

// peakRSSMiB reads VmHWM, the process's peak resident set, from /proc.
func (c *child) peakRSSMiB() float64 {
	f, err := os.Open("/proc/" + strconv.Itoa(c.PID()) + "/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// stop ends the process with SIGTERM, killing it after a minute.
func (c *child) stop() { _ = c.Stop(time.Minute) }
