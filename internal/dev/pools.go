package dev

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/poollet"
	"github.com/anvil-dev/anvil/internal/runtime/fake"
)

// LabelRuntime on the pools anvil dev starts names their runtime, so a Machine can ask for
// real VMs (qemu) or the fake runtime with a machinePoolSelector.
const LabelRuntime = "compute.anvil.dev/runtime"

// FakePool is a pool of the fake runtime that anvil dev runs in-process, so a new user
// sees Machines reach Running without any hypervisor.
type FakePool struct {
	Name   string
	Config fake.Config
}

// startFakePool serves the fake runtime on a socket in the state directory and runs a
// poollet for it. Both stop when ctx ends; errors arrive on the returned channel.
func startFakePool(ctx context.Context, cfg *rest.Config, stateDir string, p FakePool) (<-chan error, error) {
	p.Config.Name = p.Name
	p.Config.StateFile = filepath.Join(stateDir, "pools", p.Name, "fake-runtime.json")
	rt, err := fake.New(p.Config)
	if err != nil {
		return nil, err
	}
	endpoint := "unix://" + filepath.Join(stateDir, "run", p.Name+".sock")
	l, err := mri.Listen(endpoint)
	if err != nil {
		return nil, err
	}
	client, conn, err := mri.Dial(endpoint)
	if err != nil {
		l.Close()
		return nil, err
	}
	o := poollet.DefaultOptions(p.Name)
	o.Runtime, o.ProviderID = client, "fake://"+p.Name
	o.Labels = map[string]string{LabelRuntime: "fake"}
	o.SkipControllerNameValidation = true
	mgr, err := poollet.New(cfg, o)
	if err != nil {
		l.Close()
		conn.Close()
		return nil, err
	}
	errs := make(chan error, 2)
	go func() {
		defer rt.Close()
		if err := mri.ServeListener(ctx, l, rt); err != nil {
			errs <- fmt.Errorf("fake runtime %s: %w", p.Name, err)
		}
	}()
	go func() {
		defer conn.Close()
		if err := mgr.Start(ctx); err != nil {
			errs <- fmt.Errorf("poollet %s: %w", p.Name, err)
		}
	}()
	return errs, nil
}
