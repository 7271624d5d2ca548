package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/anvil-dev/anvil/internal/pki"
)

// StartAPIServer starts etcd and kube-apiserver with nothing of anvil's in them (no CRDs,
// admission policies or registry), stopped when the test ends, and returns the path of an
// admin kubeconfig: for a test that installs anvil itself, as kubectl apply -k does.
func StartAPIServer(t testing.TB) (kubeconfig string) {
	t.Helper()
	return StartAPIServerWithFlags(t, nil)
}

// StartAPIServerWithFlags is StartAPIServer with kube-apiserver flags added (name without
// dashes → value): for a test of how clients live through what the apiserver does, such
// as compacting etcd every second.
func StartAPIServerWithFlags(t testing.TB, flags map[string]string) (kubeconfig string) {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	te, cleanup, err := environment(assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	args := te.ControlPlane.GetAPIServer().Configure()
	for name, value := range flags {
		args.Set(name, value)
	}
	if _, err := te.Start(); err != nil {
		_ = te.Stop()
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = te.Stop() })
	raw, err := adminKubeconfig(te, "admin", nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// environment is envtest's etcd and kube-apiserver from assets, with the timeouts a shared
// 2-core machine needs, and a front proxy (a CA and its client certificate made in a new
// folder, which cleanup removes): kube-apiserver passes aggregated APIs' requests on, as
// to the console server (docs/console.md). Start adds anvil's CRDs.
func environment(assets string) (te *envtest.Environment, cleanup func(), err error) {
	te = &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	dir, err := os.MkdirTemp("", "anvil-front-proxy-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	ca, cert, key, err := pki.WriteNamedClientPKI(dir, "anvil-test-front-proxy-ca", frontProxyClient, 24*time.Hour)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	args := te.ControlPlane.GetAPIServer().Configure()
	for name, value := range map[string]string{
		"proxy-client-cert-file": cert, "proxy-client-key-file": key,
		"requestheader-client-ca-file": ca, "requestheader-allowed-names": frontProxyClient,
		"requestheader-username-headers": "X-Remote-User", "requestheader-group-headers": "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
	} {
		args.Set(name, value)
	}
	return te, cleanup, nil
}

// frontProxyClient is the name of kube-apiserver's front-proxy client certificate.
const frontProxyClient = "front-proxy-client"
