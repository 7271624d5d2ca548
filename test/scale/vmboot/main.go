package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/harness"
)

type report struct {
	Architecture string `json:"architecture"`
	Rounds       int    `json:"rounds"`
	// AnvilSeconds: Machine created -> marker on the console, each round.
	AnvilSeconds []float64 `json:"anvilCreateToMarkerSeconds"`
	// HandSeconds: the same QEMU command line started directly -> marker, each round.
	HandSeconds []float64 `json:"byHandStartToMarkerSeconds"`
	Ratio       float64   `json:"ratioMeanAnvilToMeanByHand"`
	// ColdPullSeconds: the test OS's entry pulled into an empty cache from the registry.
	ColdPullSeconds []float64 `json:"coldPullSeconds"`
	ImageBytes      int64     `json:"imageBytes"`
}

func main() {
	rounds := flag.Int("rounds", 3, "Machines created (and by-hand starts) to average over")
	arch := flag.String("arch", "amd64", "architecture to boot: amd64 or arm64")
	flag.Parse()
	if err := run(*rounds, computev1alpha1.Architecture(*arch)); err != nil {
		fmt.Fprintln(os.Stderr, "vmboot:", err)
		os.Exit(1)
	}
}

func run(rounds int, arch computev1alpha1.Architecture) error {
	ctrllog.SetLogger(logr.Discard())
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	testOS := filepath.Join(root, "bin", "testos")
	if _, err := os.Stat(filepath.Join(testOS, string(arch), "kernel")); err != nil {
		return fmt.Errorf("the test OS is missing from %s: run make testos", testOS)
	}
	env, err := harness.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	image, _, err := osimage.PushDirs(ctx, env.Registry.Host+"/anvil/testos:bench",
		map[computev1alpha1.Architecture]string{arch: filepath.Join(testOS, string(arch))}, nil)
	if err != nil {
		return err
	}
	rep := report{Architecture: string(arch), Rounds: rounds}
	if rep.ColdPullSeconds, rep.ImageBytes, err = coldPulls(ctx, image, arch, rounds); err != nil {
		return err
	}

	state, err := os.MkdirTemp("", "vb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	// anvil dev makes the namespace of the pools' heartbeats; here it is ours to make.
	leases := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}}
	if err := env.Client.Create(ctx, leases); err != nil {
		return err
	}
	o := manager.DefaultOptions()
	o.AllowRegistry = []string{env.Registry.Host} // the test's registry, on loopback
	o.MetricsAddr, o.HealthAddr = "0", "0"
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	defer func() { cancel(); <-mgrDone }()
	poolErrs, err := dev.StartQemuPool(ctx, env.Config, state, arch, osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}}, nil, nil, nil, logr.Discard())
	if err != nil {
		return err
	}
	go func() {
		for err := range poolErrs {
			fmt.Fprintln(os.Stderr, "pool:", err)
		}
	}()
	b := &bench{c: env.Client, image: image, arch: arch, state: state}
	if err := b.setup(ctx); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "warming the image cache")
	if _, err := b.createToMarker(ctx, "warm", false); err != nil {
		return err
	}
	for i := 0; i < rounds; i++ {
		last := i == rounds-1
		s, err := b.createToMarker(ctx, fmt.Sprintf("round-%d", i), last)
		if err != nil {
			return err
		}
		rep.AnvilSeconds = append(rep.AnvilSeconds, s)
		fmt.Fprintf(os.Stderr, "anvil round %d: %.2fs\n", i, s)
	}
	// The last round's QEMU command line, taken from /proc while it ran, started by hand.
	for i := 0; i < rounds; i++ {
		s, err := b.byHand(ctx, filepath.Join(state, fmt.Sprintf("hand-%d", i)))
		if err != nil {
			return err
		}
		rep.HandSeconds = append(rep.HandSeconds, s)
		fmt.Fprintf(os.Stderr, "by hand round %d: %.2fs\n", i, s)
	}
	if err := b.deleteMachine(ctx, b.kept); err != nil {
		return err
	}
	rep.Ratio = mean(rep.AnvilSeconds) / mean(rep.HandSeconds)
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(rep)
}

// coldPulls pulls the image's entry into a new, empty cache each round.
func coldPulls(ctx context.Context, image string, arch computev1alpha1.Architecture, rounds int) ([]float64, int64, error) {
	repo, digest, _ := strings.Cut(image, "@")
	var secs []float64
	var size int64
	for i := 0; i < rounds; i++ {
		dir, err := os.MkdirTemp("", "vbcache")
		if err != nil {
			return nil, 0, err
		}
		cache, err := osimage.NewCache(dir, osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}})
		if err != nil {
			return nil, 0, err
		}
		start := time.Now()
		files, err := cache.Pull(ctx, repo, digest, arch)
		secs = append(secs, time.Since(start).Seconds())
		if err == nil {
			size = fileSize(files.Kernel) + fileSize(files.Initramfs) + fileSize(files.Disk)
		}
		os.RemoveAll(dir)
		if err != nil {
			return nil, 0, err
		}
	}
	return secs, size, nil
}

func fileSize(path string) int64 {
	if path == "" {
		return 0
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// userData gives every guest the same first-boot config, so each boot prints one line.
func userData(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		StringData: map[string]string{computev1alpha1.DefaultUserDataKey: "#cloud-config\nhostname: bench\n# anvil-marker=bench\n"}}
}

const namespace = "default"

func class() *computev1alpha1.MachineClass {
	return &computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-vm"},
		Capabilities: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")}}
}

var errTimeout = errors.New("timed out")
