package metal

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/events"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	metalsite "github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
)

// shared is the Ironic of the package's sites, each test leaving it without nodes; TestMain
// stops it. No test here is about Ironic itself.
var shared ironictest.Shared

// startInfrastructure runs, for namespace ns, what drives Hosts in production: a real
// Ironic with fake hardware (the shared one), the Ironic provisioner and the Host
// controller (internal/metal/site). It returns the record of the deployments the Host
// controller asks of the provisioner.
func startInfrastructure(t *testing.T, ns string) *deployments {
	t.Helper()
	// The package's sites, in one process, write more Events than one site does, and a
	// test checks them: no drops.
	events.SetProcessLimit(10000, 100000)
	irc := shared.Ironic(t)
	dir, err := os.MkdirTemp("", "anvil-metal-rt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := &deployments{byNode: map[string][]deployment{}}
	s, err := metalsite.Start(ctx, metalsite.Config{RestConfig: env.Config, Namespace: ns, StateDir: dir, Ironic: irc, Workers: 8,
		Wipe: metalsite.Wipe{Method: metalsite.WipeNone}, BusyPoll: 250 * time.Millisecond, MaxBackoff: 2 * time.Second, Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		WrapProvisioner: d.wrap})
	if err != nil {
		t.Fatalf("starting the Host controller: %v", err)
	}
	t.Cleanup(s.Stop)
	return d
}

// deployments records, by node, the calls that write or tear down a server's disk that the
// provisioner accepted: a test tells a rebuild in place from a deprovision and a new
// deployment with it.
type deployments struct {
	provisioner.Provisioner
	mu     sync.Mutex
	byNode map[string][]deployment
}

// deployment is one accepted call: Provision, Rebuild or Deprovision, with what it wrote.
type deployment struct {
	op string
	d  provisioner.Deployment
}

func (r *deployments) wrap(p provisioner.Provisioner) provisioner.Provisioner {
	r.Provisioner = p
	return r
}

func (r *deployments) add(name, op string, d provisioner.Deployment, err error) error {
	if err == nil {
		r.mu.Lock()
		r.byNode[name] = append(r.byNode[name], deployment{op: op, d: d})
		r.mu.Unlock()
	}
	return err
}

func (r *deployments) Provision(ctx context.Context, name string, d provisioner.Deployment) error {
	return r.add(name, "Provision", d, r.Provisioner.Provision(ctx, name, d))
}

func (r *deployments) Rebuild(ctx context.Context, name string, d provisioner.Deployment) error {
	return r.add(name, "Rebuild", d, r.Provisioner.Rebuild(ctx, name, d))
}

func (r *deployments) Deprovision(ctx context.Context, name string) error {
	return r.add(name, "Deprovision", provisioner.Deployment{}, r.Provisioner.Deprovision(ctx, name))
}

// of is what was accepted for the Host's node.
func (r *deployments) of(h *metalv1alpha1.Host) []deployment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]deployment(nil), r.byNode[provisioner.NodeName(client.ObjectKeyFromObject(h))]...)
}

// awaitAvailable waits until every Host of ns is inspected and Available.
func awaitAvailable(t *testing.T, ns string, hosts []string) {
	t.Helper()
	for _, name := range hosts {
		h := &metalv1alpha1.Host{}
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
				return false, err
			}
			return h.Status.ProvisioningState == metalv1alpha1.StateAvailable && h.Status.OperationalStatus == metalv1alpha1.OperationalOK &&
				h.Status.Hardware != nil && h.Status.Hardware.CPUs > 0, nil
		})
		if err != nil {
			t.Fatalf("Host %s never became Available with its hardware: %v; status %+v", name, err, h.Status)
		}
	}
}
