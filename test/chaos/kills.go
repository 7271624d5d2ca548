package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// target is what a kill hits. The zero value is invalid.
type target int

const (
	targetInvalid target = iota
	targetManager
	targetPoollet
	targetRuntime
	targetIronic
	targetAPIServer
	// targetEmulator is the BMC emulator's process: the emulated servers run on, as servers
	// do while their BMC restarts.
	targetEmulator
)

var targetNames = [...]string{"invalid", "manager", "poollet", "runtime", "ironic", "apiserver", "emulator"}

func (t target) String() string {
	if t < 0 || int(t) >= len(targetNames) {
		return fmt.Sprintf("target(%d)", int(t))
	}
	return targetNames[t]
}

// kill is one SIGKILL of the plan.
type kill struct {
	at     time.Duration
	target target
	// pool is the poollet's or runtime's pool; Ironic's is the metal pool.
	pool string
	// restartAfter is how long the supervisor takes to start the process again.
	restartAfter time.Duration
}

func (k kill) String() string {
	s := fmt.Sprintf("%6.1fs %s", k.at.Seconds(), k.target)
	if k.pool != "" {
		s += " (" + k.pool + ")"
	}
	return s
}

// planKills draws the run's kills from rng: each target at least as often as minimum
// says (Ironic only with a metal pool, the BMC emulator only with emulated servers;
// poollets and runtimes of each pool in turn), extra more on targets and pools drawn at
// random, at moments between a tenth and nine tenths of d, in order.
func planKills(rng *rand.Rand, d time.Duration, minimum map[target]int, extra int, pools []string, servers bool) []kill {
	metal := slices.Contains(pools, poolMetal)
	var plan []kill
	add := func(t target, pool string) {
		plan = append(plan, kill{at: spread(rng, d, 0.1, 0.9), target: t, pool: pool,
			restartAfter: time.Duration(500+rng.Intn(2500)) * time.Millisecond})
	}
	for _, t := range []target{targetManager, targetPoollet, targetRuntime, targetIronic, targetAPIServer, targetEmulator} {
		if t == targetIronic && !metal || t == targetEmulator && !servers {
			continue
		}
		for i := 0; i < minimum[t]; i++ {
			switch t {
			case targetPoollet, targetRuntime:
				// The least kills go round the pools, so each is hit when there are enough.
				add(t, pools[i%len(pools)])
			case targetIronic:
				add(t, poolMetal)
			default:
				add(t, "")
			}
		}
	}
	for i := 0; i < extra; i++ {
		t := target(1 + rng.Intn(len(targetNames)-1))
		switch {
		case t == targetIronic && !metal, t == targetEmulator && !servers:
			add(targetManager, "")
		case t == targetIronic:
			add(t, poolMetal)
		case t == targetPoollet, t == targetRuntime:
			add(t, pools[rng.Intn(len(pools))])
		default:
			add(t, "")
		}
	}
	slices.SortStableFunc(plan, func(a, b kill) int { return cmp.Compare(a.at, b.at) })
	return plan
}

// do carries out k on cl.
func (cl *cluster) do(ctx context.Context, k kill) error {
	switch k.target {
	case targetManager:
		return cl.manager.kill(k.restartAfter)
	case targetPoollet:
		return cl.poollets[k.pool].kill(k.restartAfter)
	case targetRuntime:
		return cl.runtimes[k.pool].kill(k.restartAfter)
	case targetEmulator:
		// Started again on the same state directory and address: it adopts the servers
		// still running, with the media and boot override each BMC kept.
		return cl.emulator.kill(k.restartAfter)
	case targetIronic:
		// Ironic runs under the metal runtime, which supervises it: it is started again
		// by the runtime, not by the run. A runtime killed moments before is still
		// starting, its Ironic not yet there: wait for it (a minute at most: a runtime that
		// never starts Ironic again is a finding, not something to wait out).
		var pid int
		var err error
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
			if pid, err = childNamed(cl.runtimes[poolMetal].pid(), "ironic"); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return err
		}
		return syscall.Kill(pid, syscall.SIGKILL)
	case targetAPIServer:
		_, pid := cl.cp.PIDs()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return err
		}
		for waited := 0; processExists(pid); waited++ {
			if waited > 100 {
				return fmt.Errorf("kube-apiserver %d still exists 10 s after SIGKILL", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(k.restartAfter)
		return cl.cp.RestartAPIServer(ctx)
	}
	return fmt.Errorf("unknown kill target %v", k.target)
}

func processExists(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil
}
