package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/anvil-dev/anvil/test/harness"
)

type options struct {
	objects, targets, rounds, creators int
	qps                                float32
	burst                              int
	timeout                            time.Duration
}

// sideResult is one side's figures for one round.
type sideResult struct {
	Objects       int     `json:"objects"`
	Seconds       float64 `json:"seconds"`
	BoundPerSec   float64 `json:"boundPerSecond"`
	CreatedPerSec float64 `json:"createdPerSecond"`
}

type report struct {
	Machines      int          `json:"machines"`
	Pools         int          `json:"pools"`
	QPS           float32      `json:"clientQPS"`
	Burst         int          `json:"clientBurst"`
	Anvil         []sideResult `json:"anvil"`
	KubeScheduler []sideResult `json:"kubeScheduler"`
	// Ceiling is a plain client binding each Machine with one patch as it appears, with no
	// decision: the fastest any controller writing through the API could bind.
	Ceiling []sideResult `json:"apiWriteCeiling"`
	// FractionOfCeiling is anvil's median bind rate over the ceiling's.
	FractionOfCeiling float64 `json:"anvilFractionOfCeiling"`
	// Ratio is anvil's median bind rate over kube-scheduler's.
	Ratio float64 `json:"ratioAnvilOverKubeScheduler"`
}

func main() {
	var o options
	flag.IntVar(&o.objects, "machines", 10000, "Machines (and Pods) to bind per round")
	flag.IntVar(&o.targets, "pools", 1000, "MachinePools (and Nodes)")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds of anvil then kube-scheduler")
	flag.IntVar(&o.creators, "creators", 16, "goroutines creating objects")
	var qps float64
	flag.Float64Var(&qps, "qps", 1000, "client QPS of both schedulers")
	flag.IntVar(&o.burst, "burst", 2000, "client burst of both schedulers")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "limit for one side of one round")
	flag.Parse()
	o.qps = float32(qps)
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "scheduling:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	env, err := harness.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx := context.Background()
	rep := report{Machines: o.objects, Pools: o.targets, QPS: o.qps, Burst: o.burst}

	fmt.Fprintln(os.Stderr, "setting up anvil's fleet")
	anvil, err := newAnvilSide(ctx, env, o)
	if err != nil {
		return fmt.Errorf("anvil side: %w", err)
	}
	fmt.Fprintln(os.Stderr, "setting up kube-scheduler's nodes")
	kube, err := newKubeSide(ctx, env, o)
	if err != nil {
		return fmt.Errorf("kube-scheduler side: %w", err)
	}
	defer kube.stop()

	for round := 0; round < o.rounds; round++ {
		a, err := anvil.round(ctx, round)
		if err != nil {
			return fmt.Errorf("anvil round %d: %w", round, err)
		}
		rep.Anvil = append(rep.Anvil, a)
		fmt.Fprintf(os.Stderr, "round %d anvil: %.0f Machines/s\n", round, a.BoundPerSec)
		c, err := ceilingRound(ctx, anvil, round)
		if err != nil {
			return fmt.Errorf("API write ceiling round %d: %w", round, err)
		}
		rep.Ceiling = append(rep.Ceiling, c)
		fmt.Fprintf(os.Stderr, "round %d plain patching client: %.0f Machines/s\n", round, c.BoundPerSec)
		k, err := kube.round(ctx, round)
		if err != nil {
			return fmt.Errorf("kube-scheduler round %d: %w", round, err)
		}
		rep.KubeScheduler = append(rep.KubeScheduler, k)
		fmt.Fprintf(os.Stderr, "round %d kube-scheduler: %.0f Pods/s\n", round, k.BoundPerSec)
	}
	rep.Ratio = median(rep.Anvil) / median(rep.KubeScheduler)
	rep.FractionOfCeiling = median(rep.Anvil) / median(rep.Ceiling)
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(rep)
}

func median(rs []sideResult) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.BoundPerSec
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func result(n int, first, lastCreate, lastBound time.Time) sideResult {
	secs := lastBound.Sub(first).Seconds()
	return sideResult{
		Objects: n, Seconds: secs, BoundPerSec: float64(n) / secs,
		CreatedPerSec: float64(n) / lastCreate.Sub(first).Seconds(),
	}
}
