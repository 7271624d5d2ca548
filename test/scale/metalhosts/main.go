package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/diskimage"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

type options struct {
	hosts, rounds, workers int
	poll, timeout          time.Duration
	delays                 ironic.FakeDelays
	keep, directPowerOn    bool
}

func main() {
	var o options
	flag.IntVar(&o.hosts, "hosts", 200, "Hosts (and direct nodes) per path and round")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds; each runs both paths, the first path alternating")
	flag.IntVar(&o.workers, "workers", 0, "the Host controller's concurrent reconciles; 0: one per Host, the direct path's concurrency")
	flag.DurationVar(&o.poll, "poll", time.Second, "poll interval of both paths (the site's BusyPoll)")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "limit for one path of one round")
	flag.BoolVar(&o.keep, "keep-state", false, "keep Ironic's state folder (its log) after the run")
	flag.BoolVar(&o.directPowerOn, "direct-power-on", true, "the direct path powers nodes on after deployment as anvil does for online Hosts (fake hardware leaves power unset)")
	for name, d := range map[string]*ironic.Delay{"power": &o.delays.Power, "boot": &o.delays.Boot,
		"deploy": &o.delays.Deploy, "management": &o.delays.Management, "inspect": &o.delays.Inspect} {
		flag.Var(delayFlag{d}, name+"-delay", "Ironic's fake "+name+" delay in seconds: MIN or MIN,MAX (default none)")
	}
	flag.Parse()
	if o.hosts < 1 || o.rounds < 1 || o.hosts > 1<<16 {
		fmt.Fprintln(os.Stderr, "metalhosts: -hosts (1..65536) and -rounds must be positive")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "metalhosts:", err)
		os.Exit(1)
	}
}

// delayFlag parses "MIN" or "MIN,MAX" whole seconds.
type delayFlag struct{ d *ironic.Delay }

func (f delayFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f delayFlag) Set(s string) error {
	lo, hi, two := strings.Cut(s, ",")
	var err error
	if f.d.Min, err = strconv.Atoi(lo); err != nil {
		return err
	}
	if two {
		f.d.Max, err = strconv.Atoi(hi)
	}
	return err
}

const namespace = "metal-bench"

func run(o options) error {
	ctrllog.SetLogger(logr.Discard())
	if o.workers <= 0 {
		o.workers = o.hosts
	}
	// Ironic's requests are counted where both paths send them: anvil's provisioner uses a
	// plain http.Client, so it goes through http.DefaultTransport, and so does the direct
	// path here. Only requests to Ironic's address are counted.
	counter := &countingTransport{next: http.DefaultTransport}
	http.DefaultTransport = counter

	env, err := harness.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx := context.Background()
	if err := env.Client.Create(ctx, measure.Namespace(namespace)); err != nil {
		return err
	}
	// Short: Ironic's paths end up in its config and log lines.
	state, err := os.MkdirTemp("", "mh-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "Ironic's state and log:", state)
	} else {
		defer os.RemoveAll(state)
	}
	var inner provisioner.Provisioner
	trace := &tracing{}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	s, err := site.Start(startCtx, site.Config{RestConfig: env.Config, Namespace: namespace, StateDir: state,
		Wipe: site.Wipe{Method: site.WipeNone}, FakeDelays: o.delays, Workers: o.workers, BusyPoll: o.poll, Logger: logr.Discard(),
		WrapProvisioner: func(p provisioner.Provisioner) provisioner.Provisioner {
			inner, trace.Provisioner = p, p
			return trace
		}})
	cancel()
	if err != nil {
		return err
	}
	// Stopped before its state folder is removed and before the control plane (the
	// manager's watches would hold that up).
	defer s.Stop()
	counter.host = hostOf(s.Ironic.Endpoint())
	mv, ok := inner.(interface{ Microversion() string })
	if !ok {
		return fmt.Errorf("the site's provisioner %T does not say its microversion", inner)
	}
	user, pass, err := ironic.EnsureCredentials(ctx, env.Client, namespace, site.CredentialsSecret)
	if err != nil {
		return err
	}
	d := diskimage.Serve()
	defer d.Close()
	dp := newDirect(s.Ironic.Endpoint(), user, pass, mv.Microversion(), o.poll, d)
	dp.powerOn = o.directPowerOn
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	ap := &anvilPath{c: wc, namespace: namespace, disk: d}
	fmt.Fprintf(os.Stderr, "hosts %d, poll %s, workers %d, Ironic API %s, fake delays %+v\n",
		o.hosts, o.poll, o.workers, mv.Microversion(), o.delays)

	var ratios []float64
	for r := 1; r <= o.rounds; r++ {
		var res [2]result // direct, anvil
		order := []int{0, 1}
		if r%2 == 0 {
			order = []int{1, 0}
		}
		for _, which := range order {
			if err := dp.waitEmpty(ctx, 5*time.Minute); err != nil {
				return err
			}
			before, cpuBefore := counter.snapshot(), cpuSeconds(s.Ironic.PID())
			rctx, cancel := context.WithTimeout(ctx, o.timeout)
			if which == 0 {
				res[0], err = dp.run(rctx, r, o.hosts)
			} else {
				trace.reset()
				res[1], err = ap.run(rctx, r, o.hosts)
				res[1].calls, res[1].gaps, res[1].answers = trace.summary()
			}
			cancel()
			res[which].requests = counter.snapshot().minus(before)
			res[which].ironicCPU = cpuSeconds(s.Ironic.PID()) - cpuBefore
			if err != nil {
				return fmt.Errorf("round %d, %s path: %w (Ironic's log: %s)", r, pathName[which], err, s.Ironic.LogPath())
			}
			if which == 0 {
				err = dp.cleanup(ctx)
			} else {
				err = ap.cleanup(ctx, 5*time.Minute)
			}
			if err != nil {
				return fmt.Errorf("round %d, cleaning up after the %s path: %w", r, pathName[which], err)
			}
		}
		ratio := res[1].seconds / res[0].seconds
		ratios = append(ratios, ratio)
		fmt.Printf("round %d: direct %.1fs anvil %.1fs ratio %.2f (%s first)\n", r, res[0].seconds, res[1].seconds, ratio, pathName[order[0]])
		for which, rs := range res {
			fmt.Printf("round %d %s phases: %s\n", r, pathName[which], rs.phases)
		}
		for which, rs := range res {
			fmt.Printf("round %d %s ironic requests: %s; Ironic CPU %.0fs (%.0f%% of the path's time)\n", r, pathName[which],
				rs.requests.perHost(o.hosts), rs.ironicCPU, 100*rs.ironicCPU/rs.seconds)
		}
		fmt.Printf("round %d anvil provisioner calls: %s\n", r, res[1].calls)
		fmt.Printf("round %d anvil %s\n", r, res[1].gaps)
		fmt.Printf("round %d anvil %s\n", r, res[1].answers)
	}
	sort.Float64s(ratios)
	fmt.Printf("median ratio %.2f over %d rounds (min %.2f max %.2f), %d hosts, poll %s\n",
		median(ratios), len(ratios), ratios[0], ratios[len(ratios)-1], o.hosts, o.poll)
	return nil
}

var pathName = [2]string{"direct", "anvil"}

// result is one path's figures for one round.
type result struct {
	seconds  float64
	phases   string
	requests counts
	// ironicCPU is the CPU seconds Ironic's process used during the path.
	ironicCPU float64
	// calls and gaps: anvil's provisioner calls (tracing.summary).
	calls, gaps, answers string
}

// median of sorted xs.
func median(xs []float64) float64 {
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
