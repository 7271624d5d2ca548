package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/anvil-dev/anvil/test/harness"
)

type options struct {
	machines, pools, creators int
	managerQPS                float64
	poolletsProfile           string
	timeout                   time.Duration
	requests                  bool
}

type report struct {
	Machines           int     `json:"machines"`
	Pools              int     `json:"pools"`
	Seconds            float64 `json:"secondsCreateToAllRunning"`
	MachinesPerSecond  float64 `json:"machinesPerSecond"`
	CreatedPerSecond   float64 `json:"createdPerSecond"`
	WritesPerMachine   float64 `json:"apiWritesPerMachineAfterCreation"`
	RefusedPerMachine  float64 `json:"refusedWritesPerMachine"`
	ManagerPeakRSSMiB  float64 `json:"controllerManagerPeakRSSMiB"`
	PoolletsPeakRSSMiB float64 `json:"allPoolletsPeakRSSMiB"`
	ManagerQPS         float64 `json:"managerQPS"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "poollets" {
		if err := runPoollets(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "poollets:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.machines, "machines", 10000, "Machines to create")
	flag.IntVar(&o.pools, "pools", 100, "fake pools")
	flag.IntVar(&o.creators, "creators", 16, "goroutines creating Machines")
	flag.Float64Var(&o.managerQPS, "manager-qps", 1000, "the controller manager's --kube-api-qps (burst twice that)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit for all Machines to run")
	flag.StringVar(&o.poolletsProfile, "poollets-cpuprofile", "", "write a CPU profile of the poollets' process here")
	flag.BoolVar(&o.requests, "requests", false, "print the apiserver's requests during the run, by verb, resource and code, to stderr")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "pools:", err)
		os.Exit(1)
	}
}

// poolCPU is each fake pool's allocatable cpu; every Machine takes one.
const poolCPU = 512

func run(o options) error {
	if o.machines > o.pools*poolCPU {
		return fmt.Errorf("%d pools of %d cpu cannot hold %d one-cpu Machines: use more pools", o.pools, poolCPU, o.machines)
	}
	env, err := harness.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "anvil-scale-pools-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	raw, err := env.AdminKubeconfig("scale-pools")
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		return err
	}
	anvil, err := buildAnvil(dir)
	if err != nil {
		return err
	}
	c, err := newClients(env)
	if err != nil {
		return err
	}
	if err := c.seed(ctx); err != nil {
		return err
	}
	manager, err := startChild(dir, "manager", kubeconfig, anvil, "manager",
		"--kube-api-qps", fmt.Sprint(o.managerQPS), "--kube-api-burst", fmt.Sprint(2*o.managerQPS),
		"--concurrency", "16", "--image-architectures", "any", "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	if err != nil {
		return err
	}
	defer manager.stop()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	poollets, err := startChild(dir, "poollets", kubeconfig, self, "poollets", "-pools", fmt.Sprint(o.pools), "-dir", dir,
		"-cpu", fmt.Sprint(poolCPU), "-cpuprofile", o.poolletsProfile)
	if err != nil {
		return err
	}
	defer poollets.stop()
	fmt.Fprintln(os.Stderr, "waiting for pools to be Ready")
	if err := c.waitPoolsReady(ctx, o.pools, 3*time.Minute); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	before, err := c.requestCounts(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "creating Machines")
	first, lastCreate, lastRunning, err := c.createAndWait(ctx, o)
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	after, err := c.requestCounts(ctx)
	if err != nil {
		return err
	}
	during := after.since(before)
	writes, refused := during.machineWrites()
	if o.requests {
		printRequests(during)
	}
	secs := lastRunning.Sub(first).Seconds()
	rep := report{
		Machines: o.machines, Pools: o.pools, Seconds: secs,
		MachinesPerSecond: float64(o.machines) / secs,
		CreatedPerSecond:  float64(o.machines) / lastCreate.Sub(first).Seconds(),
		WritesPerMachine:  writes / float64(o.machines),
		RefusedPerMachine: refused / float64(o.machines),
		ManagerPeakRSSMiB: manager.peakRSSMiB(), PoolletsPeakRSSMiB: poollets.peakRSSMiB(),
		ManagerQPS: o.managerQPS,
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(rep)
}

func buildAnvil(dir string) (string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "anvil")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/anvil")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	return bin, cmd.Run()
}

// printRequests writes the requests counted during the run, most first.
func printRequests(d requestCounts) {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return d[keys[i]] > d[keys[j]] })
	for _, k := range keys {
		fmt.Fprintf(os.Stderr, "%8.0f  %s\n", d[k], k)
	}
}
