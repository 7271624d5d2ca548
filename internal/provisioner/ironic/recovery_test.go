package ironic

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/test/ironictest"
)

// provisioned registers name and takes it to Active with testImage.
func provisioned(t *testing.T, p *Provisioner, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := p.Register(ctx, fakeHost(name)); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, name, provisioner.StateManageable)
	retryBusy(t, "Provide", func() error { return p.Provide(ctx, name) })
	waitState(t, p, name, provisioner.StateAvailable)
	retryBusy(t, "Provision", func() error { return p.Provision(ctx, name, provisioner.Deployment{Image: testImage}) })
	waitState(t, p, name, provisioner.StateActive)
}

// Ironic loses its database: the node is registered again and adopted with the image it
// runs, without deploying.
func TestAdoptAfterDatabaseLoss(t *testing.T) {
	irc := ironictest.Start(t, nil)
	p, _ := newProvisioner(t, irc, nil)
	ctx := context.Background()
	const name = "ns~adopt"
	provisioned(t, p, name)

	pid := irc.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(filepath.Dir(irc.LogPath()), "ironic.db")); err != nil {
		t.Fatal(err)
	}
	// While Ironic is down, calls say so, and only so.
	sawUnavailable := false
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := p.Get(ctx, name)
		if errors.Is(err, provisioner.ErrNotFound) && irc.PID() != pid {
			break
		}
		switch {
		case errors.Is(err, provisioner.ErrUnavailable):
			sawUnavailable = true
		case err != nil && !errors.Is(err, provisioner.ErrNotFound):
			t.Fatalf("Get while Ironic restarts: %v, want ErrUnavailable", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node is still known 90 s after the database was lost (last %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("Ironic back as pid %d; ErrUnavailable seen meanwhile: %v", irc.PID(), sawUnavailable)

	if _, err := p.Register(ctx, fakeHost(name)); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, name, provisioner.StateManageable)
	var mu sync.Mutex
	var seen []provisioner.State
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n, err := p.Get(ctx, name); err == nil {
				mu.Lock()
				seen = append(seen, n.State)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	// Adopted with the token of the deployment it runs (the Host controller keeps it in
	// the Host's deployment record): a rebuild for that token finds it made.
	twice(t, "Adopt", func() error { return p.Adopt(ctx, name, provisioner.Deployment{Image: testImage, Token: "u/1"}) })
	n := waitState(t, p, name, provisioner.StateActive)
	started := false
	if err := p.Rebuild(ctx, name, provisioner.Deployment{Image: testImage, Token: "u/1",
		Starting: func(context.Context) error { started = true; return nil }}); err != nil || started {
		t.Errorf("Rebuild for the adopted deployment's token: %v, started %v; want nothing done", err, started)
	}
	time.Sleep(time.Second) // a rebuild would show as deploying by now
	close(stop)
	<-done
	if n.Image != testImage {
		t.Errorf("adopted node's image %+v, want %+v", n.Image, testImage)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(seen, provisioner.StateDeploying) {
		t.Errorf("adoption deployed the node: states seen %v", slices.Compact(seen))
	}
}

func TestDetach(t *testing.T) {
	irc := shared.Ironic(t)
	p, _ := newProvisioner(t, irc, nil)
	ctx := context.Background()
	const name = "ns~detach"
	provisioned(t, p, name)
	twice(t, "Detach", func() error { return p.Detach(ctx, name) })
	if _, err := p.Get(ctx, name); !errors.Is(err, provisioner.ErrNotFound) {
		t.Errorf("Get after Detach: %v, want ErrNotFound", err)
	}
}
