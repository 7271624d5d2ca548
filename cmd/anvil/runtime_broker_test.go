package main

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/internal/controlplane"
)

// The broker's downstream client is limited by its flags, not by client-go's default of
// 5 requests per second, which held a region's creates through a broker to about two a
// second (test/scale/broker).
func TestBrokerDownstreamClientRateIsItsFlags(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "site.kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, &rest.Config{Host: "https://127.0.0.1:6443"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{nil, 200, 400},
		{[]string{"--kube-api-qps", "300", "--kube-api-burst", "600"}, 300, 600},
	} {
		cmd := newBrokerRuntimeCommand()
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		qps, _ := cmd.Flags().GetFloat32("kube-api-qps")
		burst, _ := cmd.Flags().GetInt("kube-api-burst")
		cfg, err := downstreamConfig(kubeconfig, qps, burst)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := cs.CoreV1().RESTClient().GetRateLimiter().QPS(); got != tc.qps {
			t.Errorf("args %v: the downstream client sends %v requests per second, want %v", tc.args, got, tc.qps)
		}
		if cfg.Burst != tc.burst {
			t.Errorf("args %v: burst %d, want %d", tc.args, cfg.Burst, tc.burst)
		}
	}
	for _, bad := range [][2]any{{float32(0), 100}, {float32(50), 0}} {
		if _, err := downstreamConfig(kubeconfig, bad[0].(float32), bad[1].(int)); err == nil {
			t.Errorf("qps %v, burst %v accepted", bad[0], bad[1])
		}
	}
}
