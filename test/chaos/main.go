package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/test/harness"
)

// config is one run's shape.
type config struct {
	seed     int64
	duration time.Duration
	// machines are created on the fake pool over duration; vms on a QEMU pool (0: none);
	// metal adds a pool of fake-hardware Hosts under Ironic.
	machines, vms int
	metal         bool
	// servers and arm64Servers are emulated servers (QEMU behind the BMC emulator's own
	// process) enrolled in the metal pool beside its fake hardware.
	servers, arm64Servers int
	workers               int
	// converge bounds the wait, after the last kill, for everything to be as asked.
	converge time.Duration
	// kills is the fewest kills of each target; extraKills more are drawn at random.
	kills      map[target]int
	extraKills int
	// binDir holds etcd and kube-apiserver, anvil is the binary under test, testOS the
	// test OS's boot files (make testos).
	binDir, anvil, testOS string
	// keep keeps the run's folder (logs, state) when it ends.
	keep bool
	out  io.Writer
}

func main() {
	cfg := config{kills: map[target]int{}, out: os.Stdout}
	flag.Int64Var(&cfg.seed, "seed", 1, "seed of every random choice: what is killed when, and the churn")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Minute, "how long the churn and the kills go on")
	flag.IntVar(&cfg.machines, "machines", 500, "Machines created on the fake pool over the run")
	flag.IntVar(&cfg.vms, "vms", 3, "Machines on a QEMU pool (real guests); 0 runs no QEMU pool")
	flag.BoolVar(&cfg.metal, "metal", true, "run a bare-metal pool of fake-hardware Hosts under Ironic")
	flag.IntVar(&cfg.servers, "servers", 2, "amd64 emulated servers (SeaBIOS, TCG) in the metal pool, behind the BMC emulator's process")
	flag.IntVar(&cfg.arm64Servers, "arm64-servers", 1, "arm64 emulated servers (UEFI, TCG; needs make esp) in the metal pool")
	flag.IntVar(&cfg.workers, "workers", 16, "users creating and changing Machines at once")
	flag.DurationVar(&cfg.converge, "converge", 5*time.Minute, "how long after the last kill everything may take to be as asked")
	managerKills := flag.Int("kill-manager", 3, "fewest kills of the controller manager")
	poolletKills := flag.Int("kill-poollet", 3, "fewest kills of a poollet (one of each pool's, in turn)")
	runtimeKills := flag.Int("kill-runtime", 3, "fewest kills of a runtime process (one of each pool's, in turn)")
	ironicKills := flag.Int("kill-ironic", 1, "fewest kills of Ironic (with -metal)")
	apiserverKills := flag.Int("kill-apiserver", 1, "fewest kills of kube-apiserver")
	emulatorKills := flag.Int("kill-emulator", 1, "fewest kills of the BMC emulator's process (with -servers or -arm64-servers)")
	flag.IntVar(&cfg.extraKills, "extra-kills", 3, "kills more, of targets drawn at random")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the run's folder (logs and state)")
	flag.Parse()
	cfg.kills[targetManager], cfg.kills[targetPoollet], cfg.kills[targetRuntime] = *managerKills, *poolletKills, *runtimeKills
	cfg.kills[targetIronic], cfg.kills[targetAPIServer], cfg.kills[targetEmulator] = *ironicKills, *apiserverKills, *emulatorKills
	rep, err := setupAndRun(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	if !rep.findings.zero() || rep.convergedAfter < 0 || len(rep.exitedAlone) > 0 {
		os.Exit(1)
	}
}

// setupAndRun finds the binaries (building anvil from this checkout) and runs cfg.
func setupAndRun(ctx context.Context, cfg config) (*report, error) {
	ctrllog.SetLogger(logr.Discard())
	var err error
	if cfg.binDir, err = harness.AssetsDir(); err != nil {
		return nil, err
	}
	cfg.testOS = filepath.Join(cfg.binDir, "testos")
	if _, err := os.Stat(filepath.Join(cfg.testOS, "amd64", "kernel")); err != nil {
		return nil, fmt.Errorf("the test OS is missing from %s: run make testos", cfg.testOS)
	}
	if _, err := os.Stat(filepath.Join(cfg.binDir, "esp.img")); err != nil && cfg.metal && cfg.arm64Servers > 0 {
		return nil, fmt.Errorf("arm64 servers boot UEFI from an ISO around an ESP, missing from %s: run make esp (or -arm64-servers 0)", cfg.binDir)
	}
	// Short: unix socket paths must fit in 108 bytes. Open to others: a root qemu runtime
	// runs QEMU as an unprivileged user, which must reach the machines' folders.
	dir, err := os.MkdirTemp("", "chaos")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if !cfg.keep {
		defer os.RemoveAll(dir)
	}
	if cfg.anvil, err = harness.AnvilBinary(dir); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.out, "chaos: folder %s (logs there%s)\n", dir, map[bool]string{true: ", kept", false: ", removed at the end"}[cfg.keep])
	return run(ctx, cfg, dir)
}

// report is what a run prints.
type report struct {
	kills    []kill
	findings findings
	// convergedAfter is the time from the last kill's restart to everything being as asked;
	// negative when it was not within the bound.
	convergedAfter time.Duration
	// afterLastChange is the time from the churn's last change to the same moment.
	afterLastChange time.Duration
	// exitedAlone are processes that ended without being killed.
	exitedAlone []string
	asked       string
	// servers says what each emulated server booted, against what was asked.
	servers []string
	// unread is why the last reading of the end state failed, if it did.
	unread error
}

func run(ctx context.Context, cfg config, dir string) (*report, error) {
	rng := rand.New(rand.NewSource(cfg.seed))
	cl := &cluster{dir: dir}
	defer cl.stop()
	started := time.Now()
	if err := startCluster(ctx, cfg, cl); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.out, "chaos: up in %.1fs: pools %v\n", time.Since(started).Seconds(), cl.pools())

	rep := &report{kills: planKills(rng, cfg.duration, cfg.kills, cfg.extraKills, cl.pools(), cl.emulator != nil)}
	ch := &churn{c: cl.c, images: cl.images, metal: cl.metalImage}
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	churnSeed := rng.Int63()
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs <- ch.fakeMachines(ctx, churnSeed, cfg.machines, cfg.workers, cfg.duration)
	}()
	if cfg.vms > 0 {
		vmRNG := rand.New(rand.NewSource(rng.Int63()))
		wg.Add(1)
		go func() { defer wg.Done(); errs <- ch.vms(ctx, vmRNG, cfg.vms, cfg.duration) }()
	}
	if cfg.metal {
		metalRNG := rand.New(rand.NewSource(rng.Int63()))
		wg.Add(1)
		go func() { defer wg.Done(); errs <- ch.metalMachines(ctx, metalRNG, cfg.duration) }()
	}
	if cl.emulator != nil {
		serverRNG := rand.New(rand.NewSource(rng.Int63()))
		var archs []computev1alpha1.Architecture
		for _, s := range cl.servers {
			archs = append(archs, s.Architecture)
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs <- ch.serverMachines(ctx, serverRNG, cfg.duration, archs) }()
	}
	var steps []step
	for _, k := range rep.kills {
		steps = append(steps, step{at: k.at, do: func() error {
			fmt.Fprintf(cfg.out, "chaos: kill %s\n", k)
			if err := cl.do(ctx, k); err != nil {
				return fmt.Errorf("kill %s: %w", k, err)
			}
			return nil
		}})
	}
	killErr := runSteps(ctx, steps)
	lastKill := time.Now()
	wg.Wait()
	lastChange := time.Now()
	close(errs)
	if killErr != nil {
		return nil, killErr
	}
	for err := range errs {
		if err != nil {
			return nil, fmt.Errorf("churn: %w", err)
		}
	}
	rep.asked = fmt.Sprintf("%d created, %d powered off, %d powered on, %d image changes, %d deleted",
		ch.created.Load(), ch.poweredOff.Load(), ch.poweredOn.Load(), ch.reimaged.Load(), ch.deleted.Load())

	rep.convergedAfter = -1
	deadline := time.Now().Add(cfg.converge)
	for {
		o, err := cl.observe(ctx)
		o.askedBoots = ch.askedBoots()
		if err == nil {
			rep.findings, rep.servers = audit(o), serverBoots(o)
			if rep.findings.zero() {
				rep.convergedAfter, rep.afterLastChange = time.Since(lastKill), time.Since(lastChange)
				break
			}
		}
		// The last findings are kept when a later reading fails (Ironic restarting, say):
		// the report shows both.
		rep.unread = err
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	for _, p := range cl.all() {
		if p.exited() {
			rep.exitedAlone = append(rep.exitedAlone, p.name)
		}
	}
	rep.print(cfg, cl)
	return rep, nil
}

func (r *report) print(cfg config, cl *cluster) {
	w := cfg.out
	fmt.Fprintf(w, "chaos: seed %d, %s of churn, pools %v\n", cfg.seed, cfg.duration, cl.pools())
	counts := map[target]int{}
	for _, k := range r.kills {
		counts[k.target]++
	}
	var parts []string
	for t := targetManager; t <= targetEmulator; t++ {
		parts = append(parts, fmt.Sprintf("%s %d", t, counts[t]))
	}
	fmt.Fprintf(w, "  kills (SIGKILL): %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "  asked: %s\n", r.asked)
	for _, line := range []struct {
		name  string
		found []string
	}{
		{"orphans (runtime machines without a Machine)", r.findings.Orphans},
		{"Machines without a runtime machine", r.findings.Missing},
		{"Hosts claimed by two Machines", r.findings.DoubleClaimed},
		{"Machines not converged", r.findings.NotConverged},
		{"duplicate creates", r.findings.DuplicateCreates},
		{"server QEMUs without a Host or Machine, or two", r.findings.StrayServers},
		{"servers booted other than asked", r.findings.Boots},
		{"Hosts with failing power not reported", r.findings.PowerUnreported},
	} {
		fmt.Fprintf(w, "  %-48s %d\n", line.name, len(line.found))
		for i, f := range line.found {
			if i == 10 {
				fmt.Fprintf(w, "      ... %d more\n", len(line.found)-10)
				break
			}
			fmt.Fprintf(w, "      %s\n", f)
		}
	}
	for _, s := range r.servers {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if r.unread != nil {
		fmt.Fprintf(w, "  the last reading of the end state failed: %v\n", r.unread)
	}
	if r.convergedAfter >= 0 {
		fmt.Fprintf(w, "  converged %.1fs after the last kill (%.1fs after the last change)\n", r.convergedAfter.Seconds(), r.afterLastChange.Seconds())
	} else {
		fmt.Fprintf(w, "  NOT converged within %s of the last kill\n", cfg.converge)
	}
	if len(r.exitedAlone) > 0 {
		fmt.Fprintf(w, "  processes that ended without a kill: %v (logs in %s)\n", r.exitedAlone, cl.dir)
	}
}
