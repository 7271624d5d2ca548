package ironic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/ironic"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
)

// flaky stands in front of the real Ironic and answers 503, as Ironic does when its
// worker pool is full, to the requests fail picks.
func flaky(t *testing.T, irc *ironic.Ironic, fail func(n int64, r *http.Request) bool) string {
	t.Helper()
	target, _ := url.Parse(irc.Endpoint())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail(count.Add(1), r) {
			http.Error(w, `{"error_message": "{\"faultstring\": \"Requested action cannot be performed due to lack of free conductor workers.\"}"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// Every other request answered 503: callers see no error at all.
func TestTransient503Retried(t *testing.T) {
	irc := shared.Ironic(t)
	endpoint := flaky(t, irc, func(n int64, r *http.Request) bool { return n%2 == 0 })
	p, _ := newProvisioner(t, irc, func(o *Options) { o.Endpoint = endpoint })
	ctx := context.Background()
	const name = "ns~flaky"
	if _, err := p.Register(ctx, fakeHost(name)); err != nil {
		t.Fatalf("Register through a flaky Ironic: %v", err)
	}
	waitState(t, p, name, provisioner.StateManageable)
	retryBusy(t, "Provide", func() error { return p.Provide(ctx, name) })
	waitState(t, p, name, provisioner.StateAvailable)
	retryBusy(t, "Provision", func() error { return p.Provision(ctx, name, provisioner.Deployment{Image: testImage}) })
	waitState(t, p, name, provisioner.StateActive)
}

// Ironic answering nothing but 503 is ErrUnavailable, after a few seconds of retries.
func TestPersistent503IsUnavailable(t *testing.T) {
	irc := shared.Ironic(t)
	var down atomic.Bool
	endpoint := flaky(t, irc, func(int64, *http.Request) bool { return down.Load() })
	p, _ := newProvisioner(t, irc, func(o *Options) { o.Endpoint = endpoint })
	down.Store(true)
	start := time.Now()
	_, err := p.Get(context.Background(), "ns~any")
	if !errors.Is(err, provisioner.ErrUnavailable) {
		t.Fatalf("Get from an Ironic answering 503: %v, want ErrUnavailable", err)
	}
	t.Logf("ErrUnavailable after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if strings.Contains(err.Error(), ironictest.Password) || strings.Contains(err.Error(), "Basic ") {
		t.Error("the error carries Ironic's credentials")
	}
}

// Beyond Ironic's own max_concurrent_deploy (our queue set higher than Ironic's limit),
// Ironic's refusal is ErrBusy, not a failure.
func TestIronicLimitIsBusy(t *testing.T) {
	irc := ironictest.Start(t, func(c *ironic.Config) {
		c.MaxConcurrentDeploy = 1
		c.FakeDelays = ironic.FakeDelays{Deploy: ironic.Delay{Min: 3}}
	})
	p, _ := newProvisioner(t, irc, func(o *Options) { o.MaxConcurrentDeploy = 5 })
	ctx := context.Background()
	names := []string{"ns~lim-1", "ns~lim-2"}
	availableNodes(t, p, names...)
	d := provisioner.Deployment{Image: testImage}
	if err := p.Provision(ctx, names[0], d); err != nil {
		t.Fatal(err)
	}
	err := p.Provision(ctx, names[1], d)
	if !errors.Is(err, provisioner.ErrBusy) {
		t.Fatalf("Provision beyond Ironic's limit: %v, want ErrBusy", err)
	}
	t.Logf("Ironic's limit: %v", err)
	retryBusy(t, "Provision", func() error { return p.Provision(ctx, names[1], d) })
	for _, n := range names {
		waitState(t, p, n, provisioner.StateActive)
	}
}
