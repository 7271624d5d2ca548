package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/anvil-dev/anvil/internal/capi/extension"
)

func TestValidateNamesTheFlagToFix(t *testing.T) {
	cases := []struct {
		mutate func(*Options)
		flag   string
	}{
		{func(o *Options) { o.Concurrency = 0 }, "--concurrency"},
		{func(o *Options) { o.QPS = -1 }, "--kube-api-qps"},
		{func(o *Options) { o.Burst = 0 }, "--kube-api-burst"},
		{func(o *Options) { o.SyncPeriod = -time.Second }, "--resync-period"},
		{func(o *Options) { o.ImageArchitectures = "index" }, "--image-architectures"},
		{func(o *Options) { o.AllowRegistry = []string{"registry:port"} }, "--allow-registry"},
		{func(o *Options) { o.RegistryCredentials = "/nonexistent/config.json" }, "--registry-credentials"},
		{func(o *Options) {
			o.CAPIExtension = extension.Options{BindAddress: "127.0.0.1", CertDir: "/tmp", ClientCAFile: "/tmp/ca"}
		}, "--capi-extension-bind-address"},
		{func(o *Options) {
			o.CAPIExtension = extension.Options{BindAddress: "127.0.0.1:9444", ClientCAFile: "/tmp/ca"}
		}, "--capi-extension-cert-dir"},
		{func(o *Options) { o.CAPIExtension = extension.Options{BindAddress: "127.0.0.1:9444", CertDir: "/tmp"} }, "--capi-extension-client-ca"},
		{func(o *Options) {
			o.CAPIExtension = extension.Options{BindAddress: "127.0.0.1:9444", CertDir: "/tmp", ClientCAFile: "/nonexistent/ca.crt"}
		}, "--capi-extension-client-ca"},
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
	for _, tc := range cases {
		o := DefaultOptions()
		tc.mutate(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.flag)
		}
	}
}

// The extension answers about AnvilMachines: asked for without the provider's kinds (the
// test control plane has no Cluster API), the manager refuses to start, naming the flag.
func TestExtensionNeedsTheProvider(t *testing.T) {
	o := DefaultOptions()
	o.MetricsAddr, o.HealthAddr, o.SkipControllerNameValidation = "0", "0", true
	dir := t.TempDir()
	ca, _, err := certutil.GenerateSelfSignedCertKey("capi-client-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	o.CAPIExtension = extension.Options{BindAddress: "127.0.0.1:0", CertDir: dir, ClientCAFile: filepath.Join(dir, "ca.crt")}
	_, err = New(env.Config, o)
	if err == nil || !strings.Contains(err.Error(), "--capi-extension-bind-address") {
		t.Fatalf("New() = %v, want an error naming --capi-extension-bind-address", err)
	}
}
