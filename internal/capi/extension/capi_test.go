package extension_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/test/capienv"
	"github.com/anvil-dev/anvil/test/harness"
)

// TestClusterAPIDiscoversTheExtension runs the real Cluster API manager (v1.14, with
// InPlaceUpdates and RuntimeSDK on, presenting a client certificate) and anvil's manager
// serving the extension (--capi-extension-*), registers the ExtensionConfig
// WriteExtensionConfig writes, and waits for Cluster API's discovery: the ExtensionConfig's
// status lists the three handlers, under the names Cluster API calls them by.
func TestClusterAPIDiscoversTheExtension(t *testing.T) {
	env := extension.Env()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	caFile, certFile, keyFile := extension.WriteClientPKI(t, dir)

	capi, err := capienv.Start(ctx, env.Config, capienv.Options{
		FeatureGates: map[string]bool{"InPlaceUpdates": true, "RuntimeSDK": true},
		Args:         []string{"--runtime-extension-client-cert-file", certFile, "--runtime-extension-client-key-file", keyFile},
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
	o := manager.DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation, o.ClusterAPI = "0", "0", true, true
	o.CAPIExtension = extension.Options{BindAddress: fmt.Sprintf("127.0.0.1:%d", port), CertDir: filepath.Join(dir, "serving"), ClientCAFile: caFile}
	mgr, err := manager.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	harness.RunManager(t, mgr)

	// The manager makes the serving certificate as it starts.
	poll(ctx, t, "the extension's serving certificate", func(context.Context) (bool, error) {
		_, err := os.Stat(filepath.Join(o.CAPIExtension.CertDir, extension.CertFile))
		return err == nil, nil
	})
	manifest := filepath.Join(dir, "extensionconfig.yaml")
	if err := extension.WriteExtensionConfig(manifest, "anvil", o.CAPIExtension.BindAddress, o.CAPIExtension.CertDir); err != nil {
		t.Fatal(err)
	}
	ec, err := readExtensionConfig(manifest)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := runtimev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
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
