package osimage_test

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/anvil-dev/anvil/internal/controller/index"
)

// startManager runs a manager with the field indexes and what register adds, until the
// test ends. Each test runs its own manager in this process.
func startManager(t *testing.T, register func(ctrl.Manager) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	skipNames := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skipNames}})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	if err := register(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
}

// eventually calls check every 200 ms until it says done, and fails the test after 30 s
// with what was awaited and the last state check described.
func eventually(t testing.TB, what string, check func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, state := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s; last seen: %s", what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
