package extension_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	infrav1 "github.com/anvil-dev/anvil/api/infrastructure/v1alpha1"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/internal/pki"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/harness"
)

// TestClusterAPIDiscoversAndAsksTheExtension runs the real Cluster API manager (v1.14, with
// InPlaceUpdates and RuntimeSDK on, presenting a client certificate) and anvil's manager
// serving the extension (--capi-extension-*), registers the ExtensionConfig
// WriteExtensionConfig writes, and waits for Cluster API's discovery: the ExtensionConfig's
// status lists the three handlers, under the names Cluster API calls them by. Then two
// MachineDeployments roll out: a new image is planned in place (the old Machine kept, to
// move to the new MachineSet), a new image and class by replacement (the old one deleted).
func TestClusterAPIDiscoversAndAsksTheExtension(t *testing.T) {
	env := extension.Env()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	caFile, certFile, keyFile, err := pki.WriteClientPKI(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	capi, err := capienv.Start(ctx, env.Config, capienv.Options{
		FeatureGates: map[string]bool{"InPlaceUpdates": true, "RuntimeSDK": true},
		Args:         clusterapi.RuntimeExtensionClientArgs(certFile, keyFile),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := capi.Stop(); err != nil {
			t.Errorf("stopping Cluster API's manager: %v", err)
		}
	})

	port, err := harness.LoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	// The remote anvil of updateMachineOfRemoteCluster is this apiserver: RunAnvilManager's
	// provider lets identities name loopback addresses.
	ext := extension.Options{BindAddress: fmt.Sprintf("127.0.0.1:%d", port), CertDir: filepath.Join(dir, "serving"), ClientCAFile: caFile}
	stop, err := capienv.RunAnvilManager(ctx, env.Config, ext)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	// The manager makes the serving certificate as it starts.
	poll(ctx, t, "the extension's serving certificate", func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(ext.CertDir, extension.CertFile))
		return err == nil, nil
	})
	manifest := filepath.Join(dir, "extensionconfig.yaml")
	if err := extension.WriteExtensionConfig(manifest, "anvil", ext.BindAddress, ext.CertDir); err != nil {
		t.Fatal(err)
	}
	ec, err := readExtensionConfig(manifest)
	if err != nil {
		t.Fatal(err)
	}
	c, err := capienv.Client(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, ec); err != nil {
		t.Fatalf("registering the extension: %v", err)
	}

	want := map[string]string{
		"can-update-machine-set.anvil": "CanUpdateMachineSet",
		"can-update-machine.anvil":     "CanUpdateMachine",
		"update-machine.anvil":         "UpdateMachine",
	}
	var last *metav1.Condition
	poll(ctx, t, "Cluster API's discovery of the extension", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			return false, err
		}
		last = apimeta.FindStatusCondition(ec.Status.Conditions, runtimev1.ExtensionConfigDiscoveredCondition)
		if last == nil || last.Status != metav1.ConditionTrue {
			return false, nil
		}
		return len(ec.Status.Handlers) == len(want), nil
	}, func() string { return fmt.Sprintf("Discovered condition %+v, handlers %+v", last, ec.Status.Handlers) })
	for _, h := range ec.Status.Handlers {
		if want[h.Name] != h.RequestHook.Hook || h.RequestHook.APIVersion != "hooks.runtime.cluster.x-k8s.io/v1alpha1" ||
			h.FailurePolicy != runtimev1.FailurePolicyFail || h.TimeoutSeconds != 10 {
			t.Errorf("discovered handler %+v, want one of %v", h, want)
		}
	}
	names := make([]string, 0, len(ec.Status.Handlers))
	for _, h := range ec.Status.Handlers {
		names = append(names, h.Name)
	}
	slices.Sort(names)
	t.Logf("Cluster API discovered %v", names)

	// Cluster API's MachineDeployment controller now asks the extension whether a rollout
	// can be done in place. Its answer shows on the old MachineSet: the annotation that moves
	// its Machines to the new one for an in-place update (the move itself waits for a Node,
	// which these machines never get: the reimage is end-to-end's part).
	ns := "inplace-md"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilCluster", Name: "c"}}}
	for _, obj := range []client.Object{
		&infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec: infrav1.AnvilClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}},
		cluster,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "boot",
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c", infrav1.LabelBootstrapData: "c"}}, Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{"value": []byte("#cloud-config\n"), "format": []byte("cloud-config")}},
		template(ns, "os-1", "registry.example/os:1", "small"),
		template(ns, "os-2", "registry.example/os:2", "small"),
		template(ns, "os-2-large", "registry.example/os:2", "large"),
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, to string
		inPlace  bool
	}{
		{"a new image is updated in place", "os-2", true},
		{"a new image and class are replaced", "os-2-large", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := machineDeployment(ns, "md-"+tc.to, "os-1")
			if err := c.Create(ctx, md); err != nil {
				t.Fatal(err)
			}
			old := waitMachineSet(ctx, t, c, md, "os-1", func(ms *clusterv1.MachineSet) bool { return ptr.Deref(ms.Status.Replicas, 0) == 1 })
			rollout := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"infrastructureRef":{"name":"`+tc.to+`"}}}}}`))
			if err := c.Patch(ctx, md, rollout); err != nil {
				t.Fatal(err)
			}
			newMS := waitMachineSet(ctx, t, c, md, tc.to, func(*clusterv1.MachineSet) bool { return true })
			var moveTo string
			poll(ctx, t, "Cluster API's in-place decision", func(ctx context.Context) (bool, error) {
				if err := c.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
					return false, err
				}
				moveTo = old.Annotations[clusterv1.MachineSetMoveMachinesToMachineSetAnnotation]
				// Replaced: the old MachineSet scaled down without moving its Machine.
				return moveTo != "" || ptr.Deref(old.Spec.Replicas, 1) == 0, nil
			})
			switch {
			case tc.inPlace && moveTo != newMS.Name:
				t.Fatalf("old MachineSet %s: move-to %q, replicas %d; want its Machine moved to %s for an in-place update", old.Name, moveTo, ptr.Deref(old.Spec.Replicas, 0), newMS.Name)
			case !tc.inPlace && moveTo != "":
				t.Fatalf("old MachineSet %s moves its Machine to %s for an in-place update of a class change", old.Name, moveTo)
			}
			t.Logf("old MachineSet %s: move-to %q, replicas %d", old.Name, moveTo, ptr.Deref(old.Spec.Replicas, 0))
			// In place, the old Machine stays for the move; replaced, it goes.
			poll(ctx, t, "the old Machine kept (in place) or deleted (replaced)", func(ctx context.Context) (bool, error) {
				machines := &clusterv1.MachineList{}
				if err := c.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
					return false, err
				}
				kept := 0
				for _, m := range machines.Items {
					if m.DeletionTimestamp == nil && m.Spec.InfrastructureRef.Name != "" && slices.ContainsFunc(m.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == old.UID }) {
						kept++
					}
				}
				if tc.inPlace && (kept != 1 || len(machines.Items) != 1) {
					return false, fmt.Errorf("in place: %d Machines, %d of them the old MachineSet's and kept; want only the old one", len(machines.Items), kept)
				}
				return tc.inPlace || kept == 0, nil
			})
		})
	}

	t.Run("UpdateMachine reads the anvil Machine where identityRef points", func(t *testing.T) {
		updateMachineOfRemoteCluster(ctx, t, c, env, func(desired *infrav1.AnvilMachine) runtimehooksv1.UpdateMachineResponse {
			return updateMachine(ctx, t, "https://"+ext.BindAddress, ext.CertDir, certFile, keyFile, desired)
		})
	})
}

// updateMachine calls UpdateMachine as Cluster API does, with its client certificate.
func updateMachine(ctx context.Context, t *testing.T, url, certDir, certFile, keyFile string, desired *infrav1.AnvilMachine) runtimehooksv1.UpdateMachineResponse {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(certDir, extension.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	obj := desired.DeepCopy()
	obj.TypeMeta = metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "AnvilMachine"}
	rawObj, _ := json.Marshal(obj)
	body, _ := json.Marshal(runtimehooksv1.UpdateMachineRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "UpdateMachineRequest"},
		Desired:  runtimehooksv1.UpdateMachineRequestObjects{InfrastructureMachine: runtime.RawExtension{Raw: rawObj}},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/update-machine", bytes.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got runtimehooksv1.UpdateMachineResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// updateMachineOfRemoteCluster: for a cluster whose anvil Machines live in another anvil
// (the AnvilCluster's identityRef: here the same apiserver, through a kubeconfig whose
// context namespace is inplace-remote), UpdateMachine reports the anvil Machine there, not
// the one of the same name beside the AnvilMachine.
func updateMachineOfRemoteCluster(ctx context.Context, t *testing.T, c client.Client, env *harness.Env, call func(desired *infrav1.AnvilMachine) runtimehooksv1.UpdateMachineResponse) {
	local, remote := "inplace-identity", "inplace-remote"
	for _, ns := range []string{local, remote} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := env.AdminKubeconfig("remote-anvil")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig.Contexts[kubeconfig.CurrentContext].Namespace = remote
	if raw, err = clientcmd.Write(*kubeconfig); err != nil {
		t.Fatal(err)
	}
	am := &infrav1.AnvilMachine{ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: "rm-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "rc"}},
		Spec: infrav1.AnvilMachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: "registry.example/os:2",
			ProviderID: "anvil://" + remote + "/rm-0"}}
	for _, obj := range []client.Object{
		// The admin's grant: AnvilClusters of local may make anvil Machines in remote.
		&infrav1.AnvilClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "inplace"},
			Spec: infrav1.AnvilClusterIdentitySpec{RemoteNamespace: remote, AllowedNamespaces: []string{local}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: "remote-anvil"}, Data: map[string][]byte{"value": raw}},
		&infrav1.AnvilCluster{ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: "rc"},
			Spec: infrav1.AnvilClusterSpec{IdentityRef: &infrav1.IdentityReference{Name: "remote-anvil"},
				ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: "rc"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilCluster", Name: "rc"}}},
		am,
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The reimaged anvil Machine in the other anvil, and a decoy of the same name here that
	// still runs the old image.
	for ns, img := range map[string]string{remote: "registry.example/os:2", local: "registry.example/os:1"} {
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rm-0"},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: "small"}, Image: "registry.example/os:2",
				ImageUpdatePolicy: computev1alpha1.ImageUpdatePolicyReimage, Power: computev1alpha1.PowerOn}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		// As its pool would report it; anvil's scheduler writes the status too (no pool fits).
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				return err
			}
			m.Status.ObservedGeneration, m.Status.State = m.Generation, computev1alpha1.MachineStateRunning
			m.Status.Image = &computev1alpha1.BootedImage{Reference: img, Digest: "sha256:0123456789012345678901234567890123456789012345678901234567890123"}
			return c.Status().Update(ctx, m)
		}); err != nil {
			t.Fatal(err)
		}
	}
	var got runtimehooksv1.UpdateMachineResponse
	poll(ctx, t, "UpdateMachine to report the remote anvil Machine", func(context.Context) (bool, error) {
		got = call(am)
		return got.Status == runtimehooksv1.ResponseStatusSuccess && got.RetryAfterSeconds == 0, nil
	}, func() string { return fmt.Sprintf("last answer %+v", got) })
	if want := "anvil Machine " + remote + "/rm-0 runs registry.example/os:2"; got.Message != want {
		t.Fatalf("UpdateMachine: %q, want %q", got.Message, want)
	}
}

func template(ns, name, image, class string) *infrav1.AnvilMachineTemplate {
	return &infrav1.AnvilMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.AnvilMachineTemplateSpec{Template: infrav1.AnvilMachineTemplateResource{Spec: infrav1.AnvilMachineSpec{
			MachineClassRef: computev1alpha1.MachineClassReference{Name: class}, Image: image}}}}
}

// machineDeployment has one Machine of template, and rolls out without surge, one Machine
// unavailable at a time: an in-place update then creates no Machine.
func machineDeployment(ns, name, template string) *clusterv1.MachineDeployment {
	labels := map[string]string{"md": name}
	return &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c", Replicas: ptr.To[int32](1),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType, RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: labels}, Spec: clusterv1.MachineSpec{
				ClusterName: "c", Version: "v1.36.3", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "AnvilMachineTemplate", Name: template}}}}}
}

// waitMachineSet waits for the MachineSet of md whose template is template, until ok.
func waitMachineSet(ctx context.Context, t *testing.T, c client.Client, md *clusterv1.MachineDeployment, template string, ok func(*clusterv1.MachineSet) bool) *clusterv1.MachineSet {
	t.Helper()
	var found *clusterv1.MachineSet
	poll(ctx, t, "the MachineSet of "+md.Name+" on "+template, func(ctx context.Context) (bool, error) {
		list := &clusterv1.MachineSetList{}
		if err := c.List(ctx, list, client.InNamespace(md.Namespace), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}); err != nil {
			return false, err
		}
		for i := range list.Items {
			if ms := &list.Items[i]; ms.Spec.Template.Spec.InfrastructureRef.Name == template && ok(ms) {
				found = ms
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

func readExtensionConfig(path string) (*runtimev1.ExtensionConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ec := &runtimev1.ExtensionConfig{}
	if err := yaml.UnmarshalStrict(raw, ec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if ec.Name == "" {
		return nil, errors.New(path + " names no ExtensionConfig")
	}
	return ec, nil
}

// poll waits for cond; on a timeout it fails saying what, and what seen (if given) says.
func poll(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error), seen ...func() string) {
	t.Helper()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, cond); err != nil {
		msg := ""
		for _, f := range seen {
			msg += "; " + f()
		}
		t.Fatalf("waiting for %s: %v%s", what, err, msg)
	}
}
