package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/buildagent"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

var architectures = []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}

type report struct {
	Rounds int `json:"rounds"`
	// AnvilSeconds: OSImage updated -> its new index published, each round.
	AnvilSeconds []float64 `json:"anvilChangeToPublishedSeconds"`
	// HandSeconds: per architecture, builder Machine created by hand -> result line.
	HandSeconds map[string][]float64 `json:"byHandCreateToResultSeconds"`
	// SlowestHandSeconds: the slower architecture by hand, each round.
	SlowestHandSeconds []float64 `json:"slowestByHandSeconds"`
	// Ratio is the median of AnvilSeconds over the median of SlowestHandSeconds.
	Ratio float64 `json:"ratioMedianAnvilToMedianSlowestByHand"`
}

func main() {
	rounds := flag.Int("rounds", 3, "changes (and by-hand builds) to take the median of")
	flag.Parse()
	if err := run(*rounds); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(rounds int) error {
	ctrllog.SetLogger(logr.Discard())
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	testOS, agents := filepath.Join(root, "bin", "testos"), filepath.Join(root, "bin", "build-agent")
	for _, a := range architectures {
		if _, err := os.Stat(filepath.Join(testOS, string(a), "kernel")); err != nil {
			return fmt.Errorf("the test OS is missing from %s: run make testos", testOS)
		}
		if _, err := os.Stat(filepath.Join(agents, string(a), "anvil-build-agent")); err != nil {
			return fmt.Errorf("the build agent is missing from %s: run make agents", agents)
		}
	}
	// QEMU runs `anvil forward` for each connection a builder makes to the registry; this
	// program is not anvil, so it names the built one.
	anvil := filepath.Join(root, "bin", "anvil")
	if _, err := os.Stat(anvil); err != nil {
		return fmt.Errorf("anvil is missing from %s: run make build", anvil)
	}
	forward := []string{anvil, "forward"}
	env, err := harness.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := env.Registry.Host
	sources := map[computev1alpha1.Architecture]string{}
	for _, a := range architectures {
		sources[a] = filepath.Join(testOS, string(a))
	}
	if _, _, err := osimage.PushDirs(ctx, reg+"/"+dev.TestOSRepository, sources, nil); err != nil {
		return err
	}
	if _, err := buildagent.PushBuilder(ctx, reg+"/"+dev.BuilderRepository, testOS, agents); err != nil {
		return err
	}
	state, err := os.MkdirTemp("", "ib")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	leases := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}}
	if err := env.Client.Create(ctx, leases); err != nil {
		return err
	}
	o := manager.DefaultOptions()
	o.AllowRegistry = []string{reg} // the test's registry, on loopback
	o.MetricsAddr, o.HealthAddr = "0", "0"
	o.ImageBuilds = dev.ImageBuilds(reg, "")
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	defer func() { cancel(); <-mgrDone }()
	for _, a := range architectures {
		poolErrs, err := dev.StartQemuPool(ctx, env.Config, state, a, osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}}, dev.BuilderNetworks(reg, ""), forward, nil, logr.Discard())
		if err != nil {
			return err
		}
		go func() {
			for err := range poolErrs {
				fmt.Fprintln(os.Stderr, "pool:", err)
			}
		}()
	}

	b := &bench{c: env.Client, registry: reg, state: state}
	if err := b.setup(ctx); err != nil {
		return err
	}
	// The first build fills the pools' image caches and the registry; it is not counted.
	fmt.Fprintln(os.Stderr, "first build (not counted)")
	if _, err := b.change(ctx, "warm"); err != nil {
		return err
	}
	rep := report{Rounds: rounds, HandSeconds: map[string][]float64{}}
	for i := 0; i < rounds; i++ {
		s, err := b.change(ctx, fmt.Sprintf("round-%d", i))
		if err != nil {
			return err
		}
		rep.AnvilSeconds = append(rep.AnvilSeconds, s)
		slowest := 0.0
		for _, a := range architectures {
			h, err := b.byHand(ctx, a)
			if err != nil {
				return err
			}
			rep.HandSeconds[string(a)] = append(rep.HandSeconds[string(a)], h)
			slowest = max(slowest, h)
		}
		rep.SlowestHandSeconds = append(rep.SlowestHandSeconds, slowest)
		fmt.Fprintf(os.Stderr, "round %d: anvil %.1fs, slowest by hand %.1fs\n", i, s, slowest)
	}
	rep.Ratio = measure.Median(rep.AnvilSeconds) / measure.Median(rep.SlowestHandSeconds)
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(rep)
}
