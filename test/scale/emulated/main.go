package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

type options struct {
	servers, rounds, maxDeploy int
	memoryMiB                  int64
	timeout                    time.Duration
	keep                       bool
}

func main() {
	var o options
	flag.IntVar(&o.servers, "servers", 1, "emulated servers per path, deployed at once")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each runs both paths, the first path alternating")
	flag.IntVar(&o.maxDeploy, "max-concurrent-deploy", 0, "Ironic's (and anvil's) deploy limit; 0 keeps Ironic's 250")
	flag.Int64Var(&o.memoryMiB, "memory", 1024, "MiB of memory per emulated server (whole GiB)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit for one path of one round")
	flag.BoolVar(&o.keep, "keep-state", false, "keep the state folder (Ironic's log, consoles) after the run")
	flag.Parse()
	if o.servers < 1 || o.servers > 50 || o.rounds < 1 {
		fmt.Fprintln(os.Stderr, "emulated: -servers (1..50) and -rounds must be positive")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "emulated:", err)
		os.Exit(1)
	}
}

const namespace = "emulated-bench"

func run(o options) error {
	ctrllog.SetLogger(logr.Discard())
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	testOS := filepath.Join(root, "bin", "testos", "amd64")
	if _, err := os.Stat(filepath.Join(testOS, "initramfs")); err != nil {
		return fmt.Errorf("the test OS is missing (%v): run make testos", err)
	}
	eraser := filepath.Join(root, "bin", "eraser")
	if _, err := os.Stat(filepath.Join(eraser, "VERSIONS")); err != nil {
		return fmt.Errorf("the eraser is missing (%v): run make eraser", err)
	}
	env, err := harness.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx := context.Background()
	if err := env.Client.Create(ctx, measure.Namespace(namespace)); err != nil {
		return err
	}
	state, err := os.MkdirTemp("", "emu-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "state, Ironic's log and consoles:", state)
	} else {
		defer os.RemoveAll(state)
	}

	a, err := startAnvil(ctx, env, o, state, testOS, eraser)
	if err != nil {
		return err
	}
	defer a.stop()
	user, pass, err := ironic.EnsureCredentials(ctx, env.Client, namespace, site.CredentialsSecret)
	if err != nil {
		return err
	}
	d, err := startDirect(ctx, o, state, testOS, a.pool.Site.Ironic.Endpoint(), user, pass, a.microversion())
	if err != nil {
		return err
	}
	defer d.stop()
	fmt.Fprintf(os.Stderr, "servers %d per path, %d MiB each, Ironic API %s, max_concurrent_deploy %d (0: Ironic's 250)\n",
		o.servers, o.memoryMiB, a.microversion(), o.maxDeploy)

	var ratios []float64
	for r := 1; r <= o.rounds; r++ {
		var secs [2]float64 // direct, anvil
		var peak [2]int
		order := []int{0, 1}
		if r%2 == 0 {
			order = []int{1, 0}
		}
		for _, which := range order {
			rctx, cancel := context.WithTimeout(ctx, o.timeout)
			watch := watchDeploying(rctx, d.sc)
			if which == 0 {
				secs[0], err = d.round(rctx, r)
			} else {
				secs[1], err = a.round(rctx, r)
			}
			peak[which] = watch()
			cancel()
			if err != nil {
				return fmt.Errorf("round %d, %s path: %w (Ironic's log: %s)", r, pathName[which], err, a.pool.Site.Ironic.LogPath())
			}
			if which == 0 {
				err = d.cleanup(ctx)
			} else {
				err = a.cleanup(ctx)
			}
			if err != nil {
				return fmt.Errorf("round %d, cleaning up after the %s path: %w", r, pathName[which], err)
			}
		}
		ratio := secs[1] / secs[0]
		ratios = append(ratios, ratio)
		fmt.Printf("round %d: %d servers: direct %.1fs anvil %.1fs ratio %.2f (%s first); most nodes deploying at once: direct %d, anvil %d\n",
			r, o.servers, secs[0], secs[1], ratio, pathName[order[0]], peak[0], peak[1])
	}
	sort.Float64s(ratios)
	fmt.Printf("median ratio %.2f over %d rounds (min %.2f max %.2f), %d servers per path\n",
		ratios[len(ratios)/2], len(ratios), ratios[0], ratios[len(ratios)-1], o.servers)
	return nil
}

var pathName = [2]string{"direct", "anvil"}
