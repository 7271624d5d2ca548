package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
	te := environment(assets)
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
// 2-core machine needs; Start adds anvil's CRDs.
func environment(assets string) *envtest.Environment {
	return &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
}
