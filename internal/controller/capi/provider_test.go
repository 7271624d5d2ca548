package capi

import (
	"context"
	"encoding/pem"
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"path/filepath"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/config/crd"
	"github.com/anvil-dev/anvil/test/harness"
)

// startProvider starts a control plane with Cluster API's Cluster and Machine CRDs
// ($KUBEBUILDER_ASSETS/capi/cluster-api/crd, which make tools fills) and anvil's provider CRDs, and runs
// the provider alone (4 workers per controller, as the manager's default) with loopback
// identities allowed, so that an attack on a 127.0.0.1 listener is held by the check under
// test and not by the address check.
func startProvider(t *testing.T) *harness.Env {
	t.Helper()
	ctrllog.SetLogger(logr.Discard())
	env, err := harness.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	if err := crd.InstallClusterAPIProvider(ctx, env.Client); err != nil {
		t.Fatal(err)
	}
	assets, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, kind := range []string{"clusters", "machines"} {
		f := filepath.Join(assets, "capi", "cluster-api", "crd", "cluster.x-k8s.io_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is missing: run \"make tools\" (it copies Cluster API's CRDs into bin/capi)", f)
		}
		files = append(files, f)
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: new(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(mgr, Options{Concurrency: 4, AllowLoopback: true}); err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, mgr)
	return env
}

// namespace makes a namespace for one attack.
func namespace(t *testing.T, c client.Client, name string) string {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// newCluster makes a Cluster (infrastructure provisioned, as Cluster API reports it once the
// AnvilCluster is) and its AnvilCluster, owned by it, with identity (a Secret of that name
// holding kubeconfig) when kubeconfig is not nil.
func newCluster(t *testing.T, c client.Client, ns, name string, kubeconfig []byte) {
	t.Helper()
	spec := infrav1.AnvilClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "192.0.2.1", Port: 6443}}
	if kubeconfig != nil {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-identity"}, Data: map[string][]byte{"value": kubeconfig}}
		if err := c.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		spec.IdentityRef = &infrav1.IdentityReference{Name: secret.Name, Key: "value"}
	}
	newClusterWith(t, c, ns, name, spec)
}

// newClusterWith makes a Cluster (infrastructure provisioned) and its AnvilCluster of spec,
// owned by it.
func newClusterWith(t *testing.T, c client.Client, ns, name string, spec infrav1.AnvilClusterSpec) *infrav1.AnvilCluster {
	t.Helper()
	ctx := context.Background()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilCluster", Name: name}}}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	cluster.Status.Initialization.InfrastructureProvisioned = new(true)
	if err := c.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	ac := &infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cluster.UID}}},
		Spec: spec}
	if err := c.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	return ac
}

// newMachine makes a Cluster API Machine of cluster booting the Secret named bootstrap, and
// its AnvilMachine, both named name.
func newMachine(t *testing.T, c client.Client, ns, cluster, name, bootstrap string) {
	t.Helper()
	newMachineLabelled(t, c, ns, cluster, name, bootstrap, nil)
}

// newMachineLabelled is newMachine whose Machine has labels too (KubeadmControlPlane's
// cluster.x-k8s.io/control-plane, say).
func newMachineLabelled(t *testing.T, c client.Client, ns, cluster, name, bootstrap string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	l := map[string]string{clusterv1.ClusterNameLabel: cluster}
	for k, v := range labels {
		l[k] = v
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: new(bootstrap)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachine", Name: name}}}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	am := &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID}}},
		Spec: infrav1.AnvilMachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: "registry.example/os:1"}}
	if err := c.Create(ctx, am); err != nil {
		t.Fatal(err)
	}
}

// bootstrapData is a bootstrap data Secret as kubeadm's bootstrap provider writes it.
func bootstrapData(ns, cluster, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:          map[string]string{clusterv1.ClusterNameLabel: cluster},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "bootstrap.cluster.x-k8s.io/v1beta2", Kind: "KubeadmConfig", Name: name, UID: "kubeadmconfig-uid"}}},
		Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"value": []byte("#cloud-config\n")}}
}

// awaitReady waits until obj's Ready condition has reason and returns its message.
func awaitReady(t *testing.T, c client.Client, obj client.Object, reason string, timeout time.Duration) string {
	t.Helper()
	var last *metav1.Condition
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err == nil {
			var conds []metav1.Condition
			switch o := obj.(type) {
			case *infrav1.AnvilCluster:
				conds = o.Status.Conditions
			case *infrav1.AnvilMachine:
				conds = o.Status.Conditions
			}
			if last = apimeta.FindStatusCondition(conds, infrav1.ConditionReady); last != nil && last.Reason == reason {
				return last.Message
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%T %s: Ready %s", obj, client.ObjectKeyFromObject(obj), describeCondition(last))
	return ""
}

func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return "not set"
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

// pemOf is a DER certificate in PEM.
func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
