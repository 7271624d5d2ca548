package sites

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/config/rbac/brokeridentity"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/test/harness"
)

// Class is the MachineClass every level has, with the same capabilities (a broker
// refuses a class whose downstream namesake differs): 1 cpu, 1 GiB.
const Class = "small"

// Options shape a hierarchy.
type Options struct {
	// Levels names the control planes, top first ("region", "site", "host"); at least one.
	// Each name is also the namespace its Machines take in the level below.
	Levels []string
	// Anvil is the anvil binary the processes run (BuildAnvil makes one).
	Anvil string
	// Dir holds sockets, kubeconfigs and each process's log (<level>-<process>.log). Keep
	// it short: a unix socket's path must fit in 108 bytes.
	Dir string
	// FakeCPU and FakeMemory are the bottom pool's allocatable (default 64 and 256Gi).
	FakeCPU, FakeMemory string
	// ManagerArgs, PoolletArgs and BrokerArgs are added to every controller manager's,
	// poollet's and broker's arguments (rate limits, --interval).
	ManagerArgs, PoolletArgs, BrokerArgs []string
	// FakeArgs are added to the bottom pool's fake runtime's arguments (--latency: a
	// machine that is Pending a while before it runs, as on a real pool).
	FakeArgs []string
}

// Hierarchy is a running set of levels; Stop ends it.
type Hierarchy struct {
	// Levels are top first; the last runs the fake pool.
	Levels []*Level
	// Image is an amd64 anvil OS image (<registry>/anvil/sites-os:test) every level's
	// manager, poollet and broker may read.
	Image string
	opts  Options
}

// Level is one control plane of the hierarchy.
type Level struct {
	Name string
	Env  *harness.Env
	// Client is an admin client of the level, not throttled on the client side.
	Client client.WithWatch
	// Pool is the level's MachinePool: the broker pool of the level below, or the fake
	// pool at the bottom.
	Pool string
	// BrokerNamespace is the namespace the broker of the level above writes to here; ""
	// at the top.
	BrokerNamespace string
	// Kubeconfig is the admin's kubeconfig file.
	Kubeconfig string
	// manager, then the pool's runtime and poollet.
	procs []*proc
}

// Start starts every level's control plane, pushes the image, then each level's manager
// and pool from the bottom up, and returns once every pool is Ready and offers Class.
// On error what was started is stopped.
func Start(ctx context.Context, o Options) (h *Hierarchy, err error) {
	if len(o.Levels) == 0 || o.Anvil == "" || o.Dir == "" {
		return nil, errors.New("sites: Levels, Anvil and Dir are needed")
	}
	if o.FakeCPU == "" {
		o.FakeCPU = "64"
	}
	if o.FakeMemory == "" {
		o.FakeMemory = "256Gi"
	}
	// The MRI sockets' folder must be writable by its owner alone.
	if err := os.MkdirAll(filepath.Join(o.Dir, "run"), 0o700); err != nil {
		return nil, err
	}
	h = &Hierarchy{opts: o}
	defer func() {
		if err != nil {
			err = errors.Join(err, h.Stop())
		}
	}()
	for i, name := range o.Levels {
		l, err := startLevel(ctx, o, name)
		if err != nil {
			return h, fmt.Errorf("level %s: %w", name, err)
		}
		h.Levels = append(h.Levels, l)
		if i > 0 {
			l.BrokerNamespace = o.Levels[i-1]
			if err := ensure(ctx, l.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.BrokerNamespace}}); err != nil {
				return h, err
			}
		}
	}
	top := h.Levels[0]
	if h.Image, err = pushImage(ctx, top.Env.Registry.Host+"/anvil/sites-os:test", o.Dir); err != nil {
		return h, err
	}
	for i := len(h.Levels) - 1; i >= 0; i-- {
		if err := h.startProcesses(ctx, i); err != nil {
			return h, fmt.Errorf("level %s: %w", h.Levels[i].Name, err)
		}
		// A broker offers what the level below has only once that pool is Ready.
		if err := h.Levels[i].WaitPoolReady(ctx, 2*time.Minute); err != nil {
			return h, err
		}
	}
	return h, nil
}

// startLevel starts a control plane and creates what every level has: the Lease
// namespace and Class.
func startLevel(ctx context.Context, o Options, name string) (*Level, error) {
	env, err := harness.Start()
	if err != nil {
		return nil, err
	}
	l := &Level{Name: name, Env: env, Kubeconfig: filepath.Join(o.Dir, name+"-admin.kubeconfig")}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	if l.Client, err = client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme}); err != nil {
		return l, errors.Join(err, env.Stop())
	}
	if err := controlplane.WriteKubeconfig(l.Kubeconfig, env.Config); err != nil {
		return l, errors.Join(err, env.Stop())
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: Class},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}},
	} {
		if err := ensure(ctx, l.Client, obj); err != nil {
			return l, errors.Join(err, env.Stop())
		}
	}
	return l, nil
}

// startProcesses starts level i's manager, runtime and poollet. The poollet runs as its
// pool's ServiceAccount (config/rbac/poollet), a broker as its identity in the level
// below (config/rbac/broker), each from a kubeconfig of its own.
func (h *Hierarchy) startProcesses(ctx context.Context, i int) error {
	o, l := h.opts, h.Levels[i]
	registry := h.Levels[0].Env.Registry.Host
	log := func(process string) string { return l.Name + "-" + process }
	manager, err := startProc(o.Dir, log("manager"), l.Kubeconfig, o.Anvil, append([]string{"manager",
		"--allow-registry", registry, "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, o.ManagerArgs...)...)
	if err != nil {
		return err
	}
	l.procs = append(l.procs, manager)
	socket := "unix://" + filepath.Join(o.Dir, "run", l.Name+".sock")
	var runtime *proc
	if i == len(h.Levels)-1 {
		l.Pool = l.Name + "-fake"
		runtime, err = startProc(o.Dir, log("fake"), "", o.Anvil, append([]string{"runtime", "fake", "--pool", l.Pool, "--listen", socket,
			"--cpu", o.FakeCPU, "--memory", o.FakeMemory}, o.FakeArgs...)...)
	} else {
		below := h.Levels[i+1]
		l.Pool = below.Name
		identity, err := brokeridentity.Identity(ctx, below.Env.Config, below.BrokerNamespace, l.Pool, 0)
		if err != nil {
			return fmt.Errorf("the broker's identity in %s: %w", below.Name, err)
		}
		kubeconfig := filepath.Join(o.Dir, l.Name+"-broker.kubeconfig")
		if err := controlplane.WriteKubeconfig(kubeconfig, identity); err != nil {
			return err
		}
		runtime, err = startProc(o.Dir, log("broker"), "", o.Anvil, append([]string{"runtime", "broker",
			"--kubeconfig", kubeconfig, "--namespace", below.BrokerNamespace, "--pool", l.Pool, "--listen", socket,
			"--cache-dir", filepath.Join(o.Dir, l.Name+"-broker-cache"), "--allow-registry", registry}, o.BrokerArgs...)...)
	}
	if err != nil {
		return err
	}
	l.procs = append(l.procs, runtime)
	imp, err := rbac.InstallPoollet(ctx, l.Client, l.Pool)
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(l.Env.Config)
	cfg.Impersonate = imp
	kubeconfig := filepath.Join(o.Dir, l.Name+"-poollet.kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, cfg); err != nil {
		return err
	}
	poollet, err := startProc(o.Dir, log("poollet"), kubeconfig, o.Anvil, append([]string{"poollet",
		"--pool", l.Pool, "--runtime", socket, "--allow-registry", registry}, o.PoolletArgs...)...)
	if err != nil {
		return err
	}
	l.procs = append(l.procs, poollet)
	return nil
}

// Stop ends every process, top level first, then every control plane.
func (h *Hierarchy) Stop() error {
	var errs []error
	for _, l := range h.Levels {
		for j := len(l.procs) - 1; j >= 0; j-- {
			_ = l.procs[j].Stop(stopGrace)
		}
		l.procs = nil
	}
	for _, l := range h.Levels {
		errs = append(errs, l.Env.Stop())
	}
	h.Levels = nil
	return errors.Join(errs...)
}

// Exited names the processes that ended on their own; a hierarchy whose process died
// reports it rather than a time-out.
func (h *Hierarchy) Exited() []string {
	var out []string
	for _, l := range h.Levels {
		for _, p := range l.procs {
			if p.Exited() != nil {
				out = append(out, p.name)
			}
		}
	}
	return out
}

// Logs is where the processes' logs are.
func (h *Hierarchy) Logs() string { return h.opts.Dir }

// Machine is a Machine of Class booting Image, for a test to create at a level.
func (h *Hierarchy) Machine(namespace, name string) *computev1alpha1.Machine {
	return &computev1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: Class},
			Image: h.Image},
	}
}

// BuildAnvil is the anvil binary of this checkout (harness.AnvilBinary), built into dir
// unless the run has one.
func BuildAnvil(dir string) (string, error) { return harness.AnvilBinary(dir) }

// ensure creates obj unless it exists.
func ensure(ctx context.Context, c client.Client, obj client.Object) error {
	return client.IgnoreAlreadyExists(c.Create(ctx, obj))
}
