package capie2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/kubedev"
)

// env is the anvil binary and tools, built once by TestMain from the checkout's own module.
var env devproc.Env

func TestMain(m *testing.M) {
	os.Exit(devproc.Main(m, "capie2e", &env))
}

// suite is what every spec's input is made of, set by TestClusterAPISpecs before the specs
// run (Ginkgo calls the input getters then).
var suite struct {
	e2eConfig      *clusterctl.E2EConfig
	clusterctlPath string
	bootstrap      framework.ClusterProxy
	artifacts      string
}

// What Cluster API's own e2e suite does before its specs, and what stands in for it here:
//   - the clusterctl repository (its CreateRepository from an e2e config's providers):
//     harness.ClusterctlRepository, the layout make clusterctl-repo writes, with anvil's
//     template;
//   - the bootstrap cluster (kind): anvil dev's control plane (kube-apiserver and etcd);
//   - clusterctl init, cert-manager and waiting for the providers' Deployments: anvil dev
//     --capi runs the core, kubeadm bootstrap and KubeadmControlPlane managers (built from
//     the same cluster-api v1.14.2) and anvil's provider as processes with their webhooks,
//     so there are no Pods in the management cluster to wait for;
//   - the e2e config file: built here (variables and intervals; its providers and images
//     are only read by the steps above).
//
// The specs themselves run unchanged.
func TestClusterAPISpecs(t *testing.T) {
	// The framework's helpers assert with Gomega's global Expect, in the specs and out.
	RegisterFailHandler(Fail)
	d := kubedev.Start(t, env, "--capi")
	scheme := runtime.NewScheme()
	framework.TryAddDefaultSchemes(scheme)
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	suite.bootstrap = framework.NewClusterProxy("anvil-dev", d.Kubeconfig, scheme)
	suite.artifacts = artifactsDir(t)
	// The template's variables for anvil dev go in the clusterctl config, as Cluster API's
	// suite writes an e2e config's variables there: not every spec takes variables of its own.
	suite.clusterctlPath = filepath.Join(t.TempDir(), "clusterctl.yaml")
	if err := clusterctl.CopyAndAmendClusterctlConfig(ctx, clusterctl.CopyAndAmendClusterctlConfigInput{
		ClusterctlConfigPath: harness.ClusterctlRepository(t, filepath.Join(env.BinDir, "kubectl")),
		OutputPath:           suite.clusterctlPath,
		Variables: map[string]string{
			"ANVIL_NODE_IMAGE":          d.NodeImage,
			"ANVIL_WORKER_ARCHITECTURE": "arm64",
			// kubedev.WorkerClass: one vCPU, leaving the host's cores to the control plane.
			"ANVIL_WORKER_MACHINE_CLASS": "kube-worker",
			"ETCD_IMAGE_TAG":             d.EtcdTag,
			// The specs run one control-plane machine, a test cluster's etcd need not sync
			// its emulated disk (docs/capi.md).
			"ANVIL_LEADER_ELECT":         "false",
			"ANVIL_ETCD_UNSAFE_NO_FSYNC": "true",
		},
	}); err != nil {
		t.Fatal(err)
	}
	suite.e2eConfig = &clusterctl.E2EConfig{
		ManagementClusterName: "anvil-dev",
		Variables:             map[string]string{"KUBERNETES_VERSION": d.KubeVersion},
		Intervals:             intervals,
	}
	RunSpecs(t, "Cluster API's e2e specs against anvil")
}

// intervals are the specs' waits ("spec/what" or "default/what": timeout, polling). Every
// node is a TCG guest on a two-core machine here: a control plane is initialized about 10
// minutes after its cluster is applied and a worker of the other architecture is Ready
// about 25 minutes after (docs/kubeadm.md).
var intervals = map[string][]string{
	"default/wait-cluster":             {"10m", "10s"},
	"default/wait-control-plane":       {"45m", "10s"},
	"default/wait-worker-nodes":        {"45m", "10s"},
	"default/wait-machine-remediation": {"45m", "10s"},
	"default/wait-delete-cluster":      {"20m", "10s"},
	"default/wait-nodes-ready":         {"20m", "10s"},
}

// artifactsDir is where the specs write what they dump (resources, events, templates):
// $ARTIFACTS when set (CI keeps it), else a folder of the test's.
func artifactsDir(t *testing.T) string {
	if dir := os.Getenv("ARTIFACTS"); dir != "" {
		return dir
	}
	return t.TempDir()
}

// ctx is the specs' context.
var ctx = context.Background()
