package dev

import (
	"context"
	"fmt"

	"github.com/anvil-dev/anvil/internal/buildagent"
	osimagecontroller "github.com/anvil-dev/anvil/internal/controller/osimage"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
)

// BuilderRepository is where anvil dev publishes the builder image: the test OS with the
// build agent added.
const BuilderRepository = "anvil/builder:latest"

// BuilderNetwork is the NIC network of builder Machines on anvil dev's QEMU pools. A guest
// on it reaches the registry at builderGuestRegistry and nothing else.
const BuilderNetwork = "anvil-builders"

// builderGuestRegistry is the registry's address on a builder's network (plain HTTP: the
// forward ends at the loopback registry).
const builderGuestRegistry = "10.0.2.100:5000"

func pushBuilder(ctx context.Context, osDir, agentsDir, registryHost string) (string, error) {
	pinned, err := buildagent.PushBuilder(ctx, registryHost+"/"+BuilderRepository, osDir, agentsDir)
	if err != nil {
		return "", fmt.Errorf("publishing the builder image: %w", err)
	}
	return "builder " + pinned, nil
}

// ImageBuilds is the manager's build settings for anvil dev's registry and pools.
func ImageBuilds(registryHost string) osimagecontroller.Config {
	return osimagecontroller.Config{
		BuilderImage: registryHost + "/" + BuilderRepository, BuilderNetwork: BuilderNetwork,
		Registry: registryHost, GuestRegistry: builderGuestRegistry, GuestPlainHTTP: true,
	}
}

// BuilderNetworks gives anvil dev's QEMU pools the builders' network.
func BuilderNetworks(registryHost string) map[string]qemu.Network {
	return map[string]qemu.Network{BuilderNetwork: {Forwards: []qemu.NetworkForward{{Guest: builderGuestRegistry, Target: registryHost}}}}
}
