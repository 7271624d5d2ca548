// Package kubedev starts anvil dev ready for Kubernetes nodes: the node image (make
// node-image) and the control-plane images (make kube-images) published in its registry, and
// the nodes' MachineClass. test/kubeadm and the nested Cluster API e2e module
// (test/capie2e) share it.
package kubedev

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/anvil-dev/anvil/internal/dev"
	"github.com/anvil-dev/anvil/internal/kubeimages"
	"github.com/anvil-dev/anvil/test/devproc"
)

// NodeClass is a node's size: kubeadm's preflight wants 2 CPUs and 1.7 GB on a control
// plane. Cluster templates name it (config/clusterctl's default class).
const NodeClass = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: kube-node}
capabilities: {cpu: "2", memory: 3Gi}
`

// WorkerClass is a worker's size (the template's ANVIL_WORKER_MACHINE_CLASS): one vCPU,
// since kubeadm asks for two only of a control plane. Under TCG every vCPU is a host thread;
// on two host cores a two-vCPU worker took the emulated control plane's time, and its API
// server stopped answering Cluster API's checks.
const WorkerClass = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: kube-worker}
capabilities: {cpu: "1", memory: 3Gi}
`

// Dev is an anvil dev with the node image and the control-plane images published.
type Dev struct {
	Kubeconfig, State, RegistryPort string
	// NodeImage is the node image's reference in the registry; KubeVersion its Kubernetes.
	NodeImage, KubeVersion string
	// EtcdTag is the tag of make kube-images' etcd image (the project's etcd pin, not
	// kubeadm's default).
	EtcdTag string
	// AuditLog is kube-apiserver's log of every write (anvil dev --audit-log): AuditWrites
	// counts them.
	AuditLog string
}

// Start starts anvil dev (env's binary, more added to its flags) with no fake and no
// bare-metal pool, publishing bin/node-image and bin/kube-images; it is stopped, and its
// QEMU guests ended, when tb ends.
func Start(tb testing.TB, env devproc.Env, more ...string) *Dev {
	tb.Helper()
	// A short folder: the QEMU pools' QMP sockets live under it, within Linux's 107 bytes.
	state, err := os.MkdirTemp("", "kd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(state) })
	tb.Cleanup(func() { devproc.KillQemu(state) })
	nodeDir, imagesDir := filepath.Join(env.BinDir, "node-image"), filepath.Join(env.BinDir, "kube-images")
	version, err := os.ReadFile(filepath.Join(nodeDir, "KUBERNETES_VERSION"))
	if err != nil {
		tb.Fatalf("the node image is missing: %v (run make node-image)", err)
	}
	images, err := kubeimages.Read(imagesDir)
	if err != nil {
		tb.Fatal(err)
	}
	etcdTag := ""
	for _, im := range images {
		if im.Name == "etcd" {
			etcdTag = im.Tag
		}
	}
	if etcdTag == "" {
		tb.Fatalf("make kube-images' build in %s has no etcd image", imagesDir)
	}
	registryPort := devproc.FreePort(tb)
	args := []string{"--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "", "--metal-pool=false",
		"--apiserver-port", devproc.FreePort(tb), "--etcd-port", devproc.FreePort(tb), "--etcd-peer-port", devproc.FreePort(tb),
		"--registry-port", registryPort, "--node-image", nodeDir, "--kube-images", imagesDir,
		"--audit-log", filepath.Join(state, "audit.log")}
	dv := env.StartDev(tb, append(args, more...)...)
	tb.Cleanup(func() { dv.Stop(syscall.SIGTERM) })
	d := &Dev{Kubeconfig: filepath.Join(state, "kubeconfig"), State: state, RegistryPort: registryPort,
		KubeVersion: strings.TrimSpace(string(version)), EtcdTag: etcdTag, AuditLog: filepath.Join(state, "audit.log")}
	d.NodeImage = "127.0.0.1:" + registryPort + "/" + dev.NodeImageRepository + ":" + d.KubeVersion
	env.Apply(tb, d.Kubeconfig, NodeClass+"---"+WorkerClass)
	return d
}
