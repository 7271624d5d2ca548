package manager

import (
	"strings"
	"testing"
	"time"
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
