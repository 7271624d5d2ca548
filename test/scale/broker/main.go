package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/anvil-dev/anvil/test/sites"
)

type options struct {
	machines, rounds, creators, samples int
	interval                            time.Duration
	poolletArgs, brokerArgs, fakeArgs   string
	timeout                             time.Duration
	keep, pin                           bool
}

type report struct {
	Machines int     `json:"machines"`
	Rounds   []round `json:"rounds,omitempty"`
	// Seconds from the first create to the last Running seen, median and [min, max].
	DirectMedian float64    `json:"directMedianSeconds,omitempty"`
	DirectSpread [2]float64 `json:"directSpreadSeconds,omitempty"`
	HopMedian    float64    `json:"hopMedianSeconds,omitempty"`
	HopSpread    [2]float64 `json:"hopSpreadSeconds,omitempty"`
	// Ratio is HopMedian ÷ DirectMedian (goal ≤ 1.2).
	Ratio       float64   `json:"ratioOfMedians,omitempty"`
	Capacity    *capacity `json:"capacity,omitempty"`
	PoolletArgs string    `json:"poolletArgs,omitempty"`
	BrokerArgs  string    `json:"brokerArgs,omitempty"`
	FakeArgs    string    `json:"fakeArgs,omitempty"`
	// Pinned: each level ran on a core of its own (-pin).
	Pinned bool `json:"levelsPinnedToOwnCores"`
}

type round struct {
	Direct float64 `json:"directSeconds"`
	Hop    float64 `json:"hopSeconds"`
	Ratio  float64 `json:"ratio"`
	// The phases say where the time went: for each level and namespace, when half and all
	// of the round's Machines (or the broker's for them) were created, bound and Running.
	DirectPhases map[string]phaseTimes `json:"directPhases"`
	HopPhases    map[string]phaseTimes `json:"hopPhases"`
	DirectCost   measures              `json:"directCost"`
	HopCost      measures              `json:"hopCost"`
}

func main() {
	var o options
	flag.IntVar(&o.machines, "machines", 1000, "Machines created per round and path (0: only the capacity samples)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds, each one direct and one through the broker")
	flag.IntVar(&o.creators, "creators", 16, "goroutines creating Machines")
	flag.IntVar(&o.samples, "samples", 6, "capacity changes measured (0: none)")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "the poollets' --interval (how often a pool's runtime capacity is read; the poollet's default is 10s)")
	flag.StringVar(&o.poolletArgs, "poollet-args", "", "more arguments of every poollet, space-separated (e.g. \"--kube-api-qps 200 --kube-api-burst 400\")")
	flag.StringVar(&o.brokerArgs, "broker-args", "", "more arguments of the broker, space-separated")
	flag.StringVar(&o.fakeArgs, "fake-args", "", "more arguments of the site's fake runtime, space-separated (e.g. \"--latency 2s\": Machines Pending 2 s before they run, as on a real pool)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "limit for one round's Machines to run")
	flag.BoolVar(&o.keep, "keep", false, "keep the folder of logs")
	flag.BoolVar(&o.pin, "pin", false, "give each level a core of its own (region core 0, site core 1), as if they were separate machines")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "brokerscale")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	fmt.Fprintln(os.Stderr, "building anvil; logs in", dir)
	anvil, err := sites.BuildAnvil(dir)
	if err != nil {
		return err
	}
	h, err := sites.Start(ctx, sites.Options{Levels: []string{"region", "site"}, Anvil: anvil, Dir: dir,
		FakeCPU: "100000", FakeMemory: "1Pi",
		// The managers as in test/scale/pools: their limits are not what is compared.
		ManagerArgs: []string{"--kube-api-qps", "1000", "--kube-api-burst", "2000", "--concurrency", "16"},
		PoolletArgs: append([]string{"--interval", o.interval.String()}, strings.Fields(o.poolletArgs)...),
		BrokerArgs:  strings.Fields(o.brokerArgs), FakeArgs: strings.Fields(o.fakeArgs)})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	defer h.Stop()
	if o.pin {
		if err := h.PinLevels(); err != nil {
			return err
		}
	}
	s := &scenario{h: h, o: o}
	rep := report{Machines: o.machines, PoolletArgs: o.poolletArgs, BrokerArgs: o.brokerArgs, FakeArgs: o.fakeArgs, Pinned: o.pin}
	if o.machines > 0 {
		if err := s.seed(ctx); err != nil {
			return err
		}
		var direct, hop []float64
		for r := 0; r < o.rounds; r++ {
			d, dp, dc, err := s.round(ctx, s.directPath(), r)
			if err != nil {
				return fmt.Errorf("round %d direct: %w (logs in %s)", r, err, dir)
			}
			p, pp, pc, err := s.round(ctx, s.hopPath(), r)
			if err != nil {
				return fmt.Errorf("round %d hop: %w (logs in %s)", r, err, dir)
			}
			fmt.Fprintf(os.Stderr, "round %d: direct %.1f s, hop %.1f s\n", r, d, p)
			direct, hop = append(direct, d), append(hop, p)
			rep.Rounds = append(rep.Rounds, round{Direct: d, Hop: p, Ratio: p / d, DirectPhases: dp, HopPhases: pp,
				DirectCost: dc, HopCost: pc})
		}
		rep.DirectMedian, rep.DirectSpread = median(direct), spread(direct)
		rep.HopMedian, rep.HopSpread = median(hop), spread(hop)
		rep.Ratio = rep.HopMedian / rep.DirectMedian
	}
	if o.samples > 0 {
		if rep.Capacity, err = s.capacity(ctx); err != nil {
			return fmt.Errorf("capacity: %w (logs in %s)", err, dir)
		}
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(rep)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(v []float64) [2]float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return [2]float64{s[0], s[len(s)-1]}
}
