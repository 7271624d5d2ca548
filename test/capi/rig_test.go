package capi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/pki"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/harness/controlplanes"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

// zoneLabel is the failure domain label of the rig's pools.
const zoneLabel = "topology.kubernetes.io/zone"

// rig is what the package's tests share: the real Cluster API manager and its kubeadm
// providers, anvil's manager with the provider, a fake pool per architecture (each its own
// zone), the test OS published as an image, and a workload control plane whose Nodes the
// tests make.
type rig struct {
	capi *capienv.CAPI
	// capiArgs are the flags every start of Cluster API's manager gets (its client
	// certificate for the extension).
	capiArgs []string
	// extension is where anvil's in-place update extension listens.
	extension extension.Options
	image     string
	workload  *controlplane.ControlPlane
	// workloadClient writes the workload cluster's Nodes.
	workloadClient client.Client
	kubeconfig     []byte
}

var shared = sync.OnceValues(startRig)

// theRig starts the rig on first use; it stops with the package's control plane.
func theRig(t testing.TB) *rig {
	t.Helper()
	r, err := shared()
	if err != nil {
		t.Fatalf("starting the Cluster API rig: %v", err)
	}
	return r
}

func startRig() (*rig, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var stops []func()
	env.BeforeStop(func() {
		cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	})
	r := &rig{}
	state, err := os.MkdirTemp("", "anvil-capi-rig-")
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = os.RemoveAll(state) })
	clientCA, certFile, keyFile, err := pki.WriteClientPKI(state, 4*time.Hour)
	if err != nil {
		return nil, err
	}
	// Cluster API presents this certificate to anvil's in-place update extension (used
	// only once a test turns the InPlaceUpdates gate on).
	r.capiArgs = clusterapi.RuntimeExtensionClientArgs(certFile, keyFile)
	if r.capi, err = capienv.Start(ctx, env.Config, r.capiOptions(nil)); err != nil {
		return nil, err
	}
	stops = append(stops, func() { _ = r.capi.Stop() })
	if err := startWorkload(ctx, r, filepath.Join(state, "workload"), &stops); err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: computev1alpha1.PoolLeaseNamespace}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small"},
			Capabilities: corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}},
	} {
		if err := env.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	port, err := harness.LoopbackPort()
	if err != nil {
		return nil, err
	}
	r.extension = extension.Options{BindAddress: fmt.Sprintf("127.0.0.1:%d", port), CertDir: filepath.Join(state, "extension"), ClientCAFile: clientCA}
	stopManager, err := capienv.RunAnvilManager(ctx, env.Config, r.extension)
	if err != nil {
		return nil, err
	}
	stops = append(stops, stopManager)
	if err := startPools(ctx, state, &stops); err != nil {
		return nil, err
	}
	if r.image, err = pushTestOS(ctx, "1"); err != nil {
		return nil, err
	}
	return r, nil
}

// capiOptions are how the rig runs Cluster API's managers, with gates: the kubeadm providers
// too (TestKubeadmControlPlaneBootsKubeadmInit), and the extension's client certificate.
func (r *rig) capiOptions(gates map[string]bool) capienv.Options {
	return capienv.Options{Kubeadm: true, FeatureGates: gates, Args: r.capiArgs}
}

// startWorkload starts the workload cluster's control plane (a plain apiserver: the tests
// make its Nodes), whose kubeconfig Cluster API reads from each Cluster's <name>-kubeconfig Secret.
func startWorkload(ctx context.Context, r *rig, dir string, stops *[]func()) error {
	cp, err := controlplanes.Start(ctx, dir, nil)
	if err != nil {
		return fmt.Errorf("workload control plane: %w", err)
	}
	*stops = append(*stops, func() { _ = cp.Stop() })
	r.workload = cp
	if r.kubeconfig, err = os.ReadFile(cp.KubeconfigPath()); err != nil {
		return err
	}
	r.workloadClient, err = client.New(cp.RESTConfig(), client.Options{Scheme: env.Scheme})
	return err
}

// pools are the rig's fake pools: one per architecture, each a zone of its own.
var pools = []struct {
	name, zone string
	arch       mriv1alpha1.Architecture
}{
	{"capi-amd64", "zone-a", mriv1alpha1.Architecture_ARCHITECTURE_AMD64},
	{"capi-arm64", "zone-b", mriv1alpha1.Architecture_ARCHITECTURE_ARM64},
}

func startPools(ctx context.Context, state string, stops *[]func()) error {
	allow, err := registrynet.ParseAllowed(env.Registry.Host)
	if err != nil {
		return err
	}
	for _, p := range pools {
		cfg := fake.Config{Allocatable: &mriv1alpha1.Resources{MilliCpu: 1 << 20, MemoryBytes: 1 << 50},
			Architectures: []mriv1alpha1.Architecture{p.arch}}
		errs, err := dev.StartFakePool(ctx, env.Config, state, dev.FakePool{Name: p.name, Config: cfg},
			registrynet.Policy{Allow: []registrynet.Allowed{allow}})
		if err != nil {
			return err
		}
		*stops = append(*stops, capienv.ReportPoolErrors(ctx, p.name, errs))
		if err := labelPool(ctx, p.name, map[string]string{zoneLabel: p.zone}); err != nil {
			return err
		}
	}
	return nil
}

// labelPool adds labels to a pool once its poollet has made it, as an operator would.
func labelPool(ctx context.Context, name string, labels map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		mp := &computev1alpha1.MachinePool{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: name}, mp)
		if err == nil {
			base := mp.DeepCopy()
			for k, v := range labels {
				mp.Labels[k] = v
			}
			return env.Client.Patch(ctx, mp, client.MergeFrom(base))
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool %s was not made: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pushTestOS publishes the test OS (make testos) as a multi-arch image tagged
// capi/testos:<version>, each version its own digest (an annotation carries it).
func pushTestOS(ctx context.Context, version string) (string, error) {
	bin, err := harness.AssetsDir()
	if err != nil {
		return "", err
	}
	var images []v1.Image
	for _, arch := range []computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64} {
		files, err := osimage.FromDir(arch, filepath.Join(bin, "testos", string(arch)))
		if err != nil {
			return "", fmt.Errorf("the test OS for %s (run make testos): %w", arch, err)
		}
		files.Annotations = map[string]string{"version": version}
		img, err := osimage.Build(files)
		if err != nil {
			return "", err
		}
		images = append(images, img)
	}
	idx, err := osimage.Index(images...)
	if err != nil {
		return "", err
	}
	ref := env.Registry.Host + "/capi/testos:" + version
	if _, err := osimage.Push(ctx, ref, idx); err != nil {
		return "", err
	}
	return ref, nil
}

var errNotYet = errors.New("not yet")

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return errNotYet
	}
	return err
}
