package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/config/admission"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/config/rbac"
	"github.com/anvil-dev/anvil/internal/manifest"
	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/runtime/qemu/vm"
)

// Env is a running control plane, an admin client for it, and an OCI registry.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Registry is an embedded OCI registry on 127.0.0.1 (blobs in memory) for the
	// package's images.
	Registry *registry.Registry
	env      *envtest.Environment
	// cleanup removes the front proxy's key material.
	cleanup func()
	// beforeStop runs, last registered first, before the control plane stops.
	beforeStop []func()
}

// BeforeStop registers f to run before the control plane stops: stopping controllers a
// test package started keeps their watches from holding up the apiserver's shutdown.
func (e *Env) BeforeStop(f func()) { e.beforeStop = append(e.beforeStop, f) }

// Main starts a control plane, runs the package's tests against it, stops it and exits.
// Call it from TestMain; *env is set before any test runs. beforeStop are registered with
// Env.BeforeStop before the tests run: they stop what the package's tests share (one
// Ironic, say).
//
// A fuzzing worker (a process go test -fuzz starts) runs only the fuzz target, never the
// package's other tests, and anvil's fuzz targets are pure: it gets no control plane, so
// fuzzing one function does not start an API server beside it. *env stays nil there.
func Main(m *testing.M, env **Env, beforeStop ...func()) {
	// Controllers under test log through controller-runtime; keep their output out of test logs.
	ctrllog.SetLogger(logr.Discard())
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	e, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: cannot start the control plane: %v\n", err)
		os.Exit(1)
	}
	*env = e
	for _, f := range beforeStop {
		e.BeforeStop(f)
	}
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "harness: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Start starts etcd and kube-apiserver, installs anvil's CRDs and admission policies and
// starts the registry.
func Start() (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	crds, err := crd.Load()
	if err != nil {
		return nil, fmt.Errorf("loading anvil's CRDs: %w", err)
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	te, cleanup, err := environment(assets)
	if err != nil {
		return nil, err
	}
	te.CRDs, te.Scheme = crds, scheme
	cfg, err := te.Start()
	if err != nil {
		// Start may fail after etcd and kube-apiserver are up (installing CRDs): stop them.
		_ = te.Stop()
		cleanup()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = te.Stop()
		cleanup()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := admission.Install(ctx, c); err != nil {
		_ = te.Stop()
		cleanup()
		return nil, fmt.Errorf("installing anvil's admission policies: %w", err)
	}
	reg, err := registry.Start(context.Background(), 0, "", nil)
	if err != nil {
		_ = te.Stop()
		cleanup()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, Registry: reg, env: te, cleanup: cleanup}, nil
}

// AdminKubeconfig returns a kubeconfig for a new user in system:masters, for processes
// started beside the test (kube-scheduler in benchmarks, kubectl).
func (e *Env) AdminKubeconfig(user string) ([]byte, error) {
	return adminKubeconfig(e.env, user, e.Config)
}

// adminKubeconfig adds user in system:masters to te (base: its address and CA; nil for
// envtest's own) and returns a kubeconfig for it.
func adminKubeconfig(te *envtest.Environment, user string, base *rest.Config) ([]byte, error) {
	u, err := te.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, base)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// Stop runs the BeforeStop functions and ends the control plane.
func (e *Env) Stop() error {
	for i := len(e.beforeStop) - 1; i >= 0; i-- {
		e.beforeStop[i]()
	}
	defer e.cleanup()
	return errors.Join(e.Registry.Stop(), e.env.Stop())
}

// AssetsDir is the folder holding kube-apiserver and etcd: $KUBEBUILDER_ASSETS, or the
// checkout's bin/. It fails, naming the fix, when either binary is not there.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s is missing from %s: run \"make tools\" (or set KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd)", name, dir)
		}
	}
	return dir, nil
}

// RepoRoot is the anvil checkout this test runs in: the nearest parent holding anvil's
// go.mod (a nested test module, such as test/capie2e, has a go.mod of its own).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(mod) == anvilModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + anvilModule + " above the working directory: run tests from inside the anvil checkout")
		}
		dir = parent
	}
}

// anvilModule is anvil's module path.
const anvilModule = "github.com/anvil-dev/anvil"

// modulePath is the path a go.mod's module line names ("" if none).
func modulePath(goMod []byte) string {
	for _, line := range strings.Split(string(goMod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// InstallRBAC creates the shipped roles of config/rbac/<dir> and the given bindings, each
// only when missing, as an operator installing anvil would.
func (e *Env) InstallRBAC(ctx context.Context, dir string, bindings ...client.Object) error {
	objs, err := rbac.Load(dir)
	if err != nil {
		return err
	}
	if _, err := manifest.CreateMissing(ctx, e.Client, objs); err != nil {
		return err
	}
	for _, b := range bindings {
		if err := e.Client.Create(ctx, b); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	return nil
}

// InstallTenant gives user the shipped tenant roles, as an operator onboarding a tenant
// would: anvil-tenant in namespace ns and the MachineClass reader cluster-wide.
func (e *Env) InstallTenant(ctx context.Context, user, ns string) error {
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	return e.InstallRBAC(ctx, "tenant",
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + user, Namespace: ns}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "anvil-tenant"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "classes-" + user}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "anvil-machineclass-reader"}},
	)
}

// As returns a client acting as user in groups (and system:authenticated) through the
// apiserver's impersonation: the user's own permissions, checked by the real authorizer.
func (e *Env) As(user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return client.New(cfg, client.Options{Scheme: e.Scheme})
}

// ServiceAccountConfig makes ServiceAccount namespace/name bound to clusterRole and
// returns a config that acts with a token of it alone: for a server that presents a bearer
// token onward, as anvil's console server does to poollets.
func (e *Env) ServiceAccountConfig(ctx context.Context, namespace, name, clusterRole string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}}
	for _, obj := range []client.Object{sa, binding} {
		if err := e.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// FreePort is a loopback TCP port free at the time of the call, for a server a test starts.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := LoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// LoopbackPort is FreePort for code that has no testing.TB (helpers started from TestMain).
func LoopbackPort() (int, error) { return vm.FreeLoopbackPort() }

// RunManager starts mgr (a controller-runtime manager) until the test ends, then stops it
// and fails the test if it ended with an error.
func RunManager(t testing.TB, mgr interface{ Start(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
