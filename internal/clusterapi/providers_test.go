package clusterapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMissingPiecesNameTheFix(t *testing.T) {
	dir := t.TempDir()
	_, err := locate(dir, CoreOnly)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "capi-manager")) || !strings.Contains(err.Error(), `run "make tools"`) {
		t.Errorf("locate in an empty folder: %v, want the missing capi-manager and the fix", err)
	}
	touch := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	touch(filepath.Join(dir, "capi-manager"))
	_, err = locate(dir, CoreOnly)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "capi", "cluster-api", "webhook", "manifests.yaml")) || !strings.Contains(err.Error(), `run "make tools"`) {
		t.Errorf("locate without bin/capi: %v, want the missing manifests and the fix", err)
	}
	touch(filepath.Join(dir, "capi", "cluster-api", "webhook", "manifests.yaml"))
	touch(filepath.Join(dir, "capi", "cluster-api", "crd", "x.yaml"))
	touch(filepath.Join(dir, "capi", "VERSION"))
	touch(filepath.Join(dir, "capi", "clusterctl-api.yaml"))
	if _, err := locate(dir, CoreOnly); err != nil {
		t.Errorf("locate with the core's pieces: %v", err)
	}
	// A checkout whose make tools predates the kubeadm providers.
	_, err = locate(dir, WithKubeadm)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "capi-kubeadm-bootstrap")) || !strings.Contains(err.Error(), `run "make tools"`) {
		t.Errorf("locate without the kubeadm providers: %v, want the missing capi-kubeadm-bootstrap and the fix", err)
	}
}

func TestFeatureGatesFlag(t *testing.T) {
	for _, tc := range []struct {
		gates map[string]bool
		want  string
	}{
		{nil, ""},
		{map[string]bool{"RuntimeSDK": true, "InPlaceUpdates": true}, "InPlaceUpdates=true,RuntimeSDK=true"},
		{map[string]bool{"MachinePool": false}, "MachinePool=false"},
	} {
		if got := FeatureGates(tc.gates); got != tc.want {
			t.Errorf("FeatureGates(%v) = %q, want %q", tc.gates, got, tc.want)
		}
	}
}
