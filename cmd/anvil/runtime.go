package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

func newRuntimeCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "runtime", Short: "Serve a Machine Runtime Interface runtime on a unix socket"}
	cmd.AddCommand(newFakeRuntimeCommand(), newQEMURuntimeCommand(), newMetalRuntimeCommand(), newBrokerRuntimeCommand())
	return cmd
}

// fakeFlags are the fake runtime's settings as flags, shared with anvil dev.
type fakeFlags struct {
	cpu, memory   string
	archs         []string
	latency       time.Duration
	jitter        time.Duration
	failure       float64
	silentFailure float64
	stateFile     string
	seed          int64
}

func (f *fakeFlags) config(name string) (fake.Config, error) {
	cpu, err := resource.ParseQuantity(f.cpu)
	if err != nil {
		return fake.Config{}, fmt.Errorf("--cpu %q: %w", f.cpu, err)
	}
	mem, err := resource.ParseQuantity(f.memory)
	if err != nil {
		return fake.Config{}, fmt.Errorf("--memory %q: %w", f.memory, err)
	}
	cfg := fake.Config{
		Name:        name,
		Allocatable: &mriv1alpha1.Resources{MilliCpu: cpu.MilliValue(), MemoryBytes: mem.Value()},
		Latency:     f.latency, Jitter: f.jitter, FailureRate: f.failure, SilentFailureRate: f.silentFailure,
		StateFile: f.stateFile, Seed: f.seed,
	}
	for _, a := range f.archs {
		arch := mri.ArchToMRI(computev1alpha1.Architecture(a))
		if arch == mriv1alpha1.Architecture_ARCHITECTURE_UNSPECIFIED {
			return fake.Config{}, fmt.Errorf("--arch %q: use one of %v", a, computev1alpha1.KnownArchitectures)
		}
		cfg.Architectures = append(cfg.Architectures, arch)
	}
	return cfg, nil
}

func newFakeRuntimeCommand() *cobra.Command {
	var socket, name string
	var serve serveFlags
	f := fakeFlags{cpu: "64", memory: "256Gi", archs: []string{"amd64"}}
	cmd := &cobra.Command{
		Use:   "fake",
		Short: "An in-memory runtime for tests and scale runs: runs no machines, honours the MRI contract",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(name)
			if err != nil {
				return err
			}
			rt, err := fake.New(cfg)
			if err != nil {
				return err
			}
			defer rt.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "fake runtime %s serving on %s\n", name, socket)
			return mri.Serve(cmd.Context(), socket, rt, serve.options(name)...)
		},
	}
	fl := cmd.Flags()
	addListenFlag(fl, &socket, mri.DefaultEndpoint("fake"), "socket")
	serve.add(fl)
	name = "fake"
	addPoolFlag(fl, &name, "name of the MachinePool it serves; starts every machine id")
	fl.StringVar(&f.stateFile, "state-file", f.stateFile, "keep machines across restarts in this file")
	f.addFlags(cmd)
	return cmd
}

// addFlags adds the pool's shape; the state file is the caller's (anvil dev keeps it in
// its state directory).
func (f *fakeFlags) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.cpu, "cpu", f.cpu, "allocatable cpu of the fake pool")
	fl.StringVar(&f.memory, "memory", f.memory, "allocatable memory of the fake pool")
	fl.StringSliceVar(&f.archs, "arch", f.archs, "architectures the fake pool runs")
	fl.DurationVar(&f.latency, "latency", f.latency, "duration of each step (boot, power, delete)")
	fl.DurationVar(&f.jitter, "jitter", f.jitter, "random extra duration of each step")
	fl.Float64Var(&f.failure, "failure-rate", f.failure, "probability that a call fails with UNAVAILABLE")
	fl.Float64Var(&f.silentFailure, "silent-failure-rate", f.silentFailure, "probability that a call succeeds but its effect is lost")
	fl.Int64Var(&f.seed, "seed", f.seed, "seed of latency and failure randomness")
}

// serveFlags are how a runtime serves its MRI socket: who may be at the other end, and
// where its creates are journalled.
type serveFlags struct {
	peers   []uint32
	journal string
}

func (s *serveFlags) add(f *pflag.FlagSet) {
	addPeerFlag(f, &s.peers)
	f.StringVar(&s.journal, "create-journal", "", "append a line (Machine uid, machine id) to this file for every machine create answered; chaos runs count duplicate creates from it")
}

// options are the serving options for the runtime of pool.
func (s *serveFlags) options(pool string) []mri.Option {
	opts := []mri.Option{mri.AllowPeers(s.peers...), mri.Pool(pool)}
	if s.journal != "" {
		opts = append(opts, mri.CreateJournal(s.journal))
	}
	return opts
}

// addPeerFlag adds --peer-uid: users, besides this process's own, whose processes may be
// at the other end of the MRI socket (checked with SO_PEERCRED on both ends).
func addPeerFlag(f *pflag.FlagSet, peers *[]uint32) {
	f.Var((*uidList)(peers), "peer-uid", "uid, besides this process's own, allowed at the other end of the MRI socket (repeatable)")
}

// uidList is a repeatable flag of user ids; a value that is not one is refused at parse.
type uidList []uint32

func (l *uidList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		uid, err := strconv.ParseUint(strings.TrimSpace(part), 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a user id (0 to 4294967295)", part)
		}
		*l = append(*l, uint32(uid))
	}
	return nil
}

func (l *uidList) String() string {
	parts := make([]string, len(*l))
	for i, u := range *l {
		parts[i] = strconv.FormatUint(uint64(u), 10)
	}
	return strings.Join(parts, ",")
}

func (l *uidList) Type() string { return "uids" }
