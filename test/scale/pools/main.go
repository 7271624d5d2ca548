package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anvil-dev/anvil/internal/watchstats"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

type options struct {
	machines, pools, creators int
	managerQPS                float64
	poolletsProfile           string
	apiserverProfile          string
	timeout, idle             time.Duration
	poolletInterval           time.Duration
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
	// SeenRunning counts the Machines the scenario saw Running: all of them, or the run
	// failed.
	SeenRunning int `json:"machinesSeenRunning"`
	// SlowestMachine took longest from its create's return to being seen Running.
	SlowestMachine        string  `json:"slowestMachine"`
	SlowestMachineSeconds float64 `json:"slowestMachineSecondsCreatedToRunning"`
	// Watches are each client's informer watches that ended and its relists, over the
	// whole run: the scenario's own, the controller manager's (scheduler and all), all
	// poollets' summed.
	Watches map[string]watchstats.Counts `json:"watchEndsAndRelists"`
	// APIServerWatchers are the watches the apiserver served when the last Machine ran
	// (anvil's compute resources and Leases by resource, and the total); TerminatedWatchers
	// those it closed as too slow during the run, by resource.
	APIServerWatchers  map[string]float64 `json:"apiserverWatchersAtEnd"`
	TerminatedWatchers map[string]float64 `json:"apiserverTerminatedWatchers"`
	// MachineEvents are the run's Machine changes, and those times the Machine watchers
	// at the end: how often the apiserver queued one to a watcher.
	MachineEvents machineEvents `json:"apiserverMachineWatchEvents"`
	// CPUSeconds are each process's CPU time from the first create to the last Running;
	// IdleCPU its share of a core while the pools were Ready and no Machine existed.
	CPUSeconds cpuTimes `json:"cpuSecondsCreateToAllRunning"`
	IdleCPU    cpuTimes `json:"cpuCoresIdleBeforeCreate"`
	// Error says why the run did not finish; the figures above are what it saw until then.
	Error string `json:"error,omitempty"`
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
	flag.DurationVar(&o.poolletInterval, "poollet-interval", 0, "each poollet's interval between runtime reads and Lease renewals (the Lease lasting four); 0 keeps the default, 10s")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "how long the processes' CPU is read with the pools Ready and no Machine, before creating")
	flag.StringVar(&o.poolletsProfile, "poollets-cpuprofile", "", "write a CPU profile of the poollets' process here")
	flag.StringVar(&o.apiserverProfile, "apiserver-cpuprofile", "", "write a CPU profile of kube-apiserver over the idle window (-idle) here")
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
	anvil, err := harness.AnvilBinary(dir)
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
	token, err := metricsToken(ctx, env, c)
	if err != nil {
		return err
	}
	managerMetrics, poolletsMetrics, err := metricsAddrs()
	if err != nil {
		return err
	}
	manager, err := startChild(dir, "manager", kubeconfig, anvil, "manager",
		"--kube-api-qps", fmt.Sprint(o.managerQPS), "--kube-api-burst", fmt.Sprint(2*o.managerQPS),
		"--concurrency", "16", "--image-architectures", "any", "--metrics-bind-address", managerMetrics, "--health-probe-bind-address", "0")
	if err != nil {
		return err
	}
	defer manager.stop()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	poollets, err := startChild(dir, "poollets", kubeconfig, self, "poollets", "-pools", fmt.Sprint(o.pools), "-dir", dir,
		"-cpu", fmt.Sprint(poolCPU), "-cpuprofile", o.poolletsProfile, "-metrics-addr", poolletsMetrics, "-interval", o.poolletInterval.String())
	if err != nil {
		return err
	}
	defer poollets.stop()
	pids, err := envtestPIDs()
	if err != nil {
		return err
	}
	pids[procManager], pids[procPoollets] = manager.PID(), poollets.PID()
	fmt.Fprintln(os.Stderr, "waiting for pools to be Ready")
	if err := c.waitPoolsReady(ctx, o.pools, 3*time.Minute); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	rep := report{Machines: o.machines, Pools: o.pools, ManagerQPS: o.managerQPS}
	profiled := make(chan error, 1)
	if o.apiserverProfile != "" && o.idle >= time.Second {
		go func() { profiled <- c.apiserverProfile(ctx, o.idle, o.apiserverProfile) }()
	} else {
		profiled <- nil
	}
	if rep.IdleCPU, err = idleCPU(pids, o.idle); err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		return err
	}
	before, err := c.requestCounts(ctx)
	if err != nil {
		return err
	}
	cpuBefore, err := readCPU(pids)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "creating Machines")
	out, runErr := c.createAndWait(ctx, o)
	if runErr != nil {
		runErr = fmt.Errorf("%w (logs in %s)", runErr, dir)
		rep.Error = runErr.Error()
	}
	cpuAfter, err := readCPU(pids)
	if err != nil {
		return errors.Join(runErr, err)
	}
	rep.CPUSeconds = cpuAfter.since(cpuBefore)
	if rep.APIServerWatchers, err = c.apiserverWatchers(ctx); err != nil {
		return errors.Join(runErr, err)
	}
	after, err := c.requestCounts(ctx)
	if err != nil {
		return errors.Join(runErr, err)
	}
	during := after.since(before)
	writes, refused := during.machineWrites()
	if o.requests {
		printRequests(during)
	}
	rep.TerminatedWatchers = during.watchCounts("TERMINATED")
	rep.MachineEvents = during.machineEvents(rep.APIServerWatchers["machines"])
	if rep.Watches, err = allWatchCounts(ctx, managerMetrics, poolletsMetrics, token); err != nil {
		return errors.Join(runErr, err)
	}
	rep.SeenRunning = len(out.running)
	name, took := measure.Slowest(out.created, out.running)
	rep.SlowestMachine, rep.SlowestMachineSeconds = name, round1(took.Seconds())
	if runErr == nil {
		secs := out.lastRunning.Sub(out.first).Seconds()
		rep.Seconds = secs
		rep.MachinesPerSecond = float64(o.machines) / secs
		rep.CreatedPerSecond = float64(o.machines) / out.lastCreate.Sub(out.first).Seconds()
		rep.WritesPerMachine = writes / float64(o.machines)
		rep.RefusedPerMachine = refused / float64(o.machines)
	}
	rep.ManagerPeakRSSMiB, rep.PoolletsPeakRSSMiB = manager.peakRSSMiB(), poollets.peakRSSMiB()
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// metricsAddrs are free loopback addresses for the manager's and the poollets' metrics.
func metricsAddrs() (manager, poollets string, err error) {
	var ports [2]int
	for i := range ports {
		if ports[i], err = harness.LoopbackPort(); err != nil {
			return "", "", err
		}
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), nil
}

// idleCPU is each process's share of a core over span, with the pools Ready and idle:
// what heartbeats and pool status writes cost before any Machine exists.
func idleCPU(pids map[string]int, span time.Duration) (cpuTimes, error) {
	if span <= 0 {
		return nil, nil
	}
	before, err := readCPU(pids)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	time.Sleep(span)
	after, err := readCPU(pids)
	if err != nil {
		return nil, err
	}
	return after.since(before).share(time.Since(start)), nil
}

// allWatchCounts are the watch ends and relists of the scenario (in this process), of the
// manager (its metrics over HTTPS, as the metrics reader) and of the poollets' process.
func allWatchCounts(ctx context.Context, managerAddr, poolletsAddr, token string) (map[string]watchstats.Counts, error) {
	out := map[string]watchstats.Counts{"scenario": watchstats.Sum(watchstats.Read(), measure.WatchClient)}
	var err error
	if out["manager"], err = watchCounts(ctx, "https://"+managerAddr+"/metrics", token); err != nil {
		return nil, fmt.Errorf("the manager's metrics: %w", err)
	}
	if out["poollets"], err = watchCounts(ctx, "http://"+poolletsAddr+"/metrics", ""); err != nil {
		return nil, fmt.Errorf("the poollets' metrics: %w", err)
	}
	return out, nil
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
