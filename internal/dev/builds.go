package dev

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
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

// BuilderGuestPackageProxy is the package proxy's address on a builder's network, when
// anvil dev is given one (--package-proxy).
const BuilderGuestPackageProxy = "10.0.2.101:3128"

func pushBuilder(ctx context.Context, osDir, agentsDir, registryHost string) (string, error) {
	pinned, err := buildagent.PushBuilder(ctx, registryHost+"/"+BuilderRepository, osDir, agentsDir)
	if err != nil {
		return "", fmt.Errorf("publishing the builder image: %w", err)
	}
	return "builder " + pinned, nil
}

// ImageBuilds is the manager's build settings for anvil dev's registry and pools, and the
// package proxy (host:port on this machine, "" for none) BuilderNetworks forwards.
func ImageBuilds(registryHost, packageProxy string) osimagecontroller.Config {
	c := osimagecontroller.Config{
		BuilderImage: registryHost + "/" + BuilderRepository, BuilderNetwork: BuilderNetwork,
		Registry: registryHost, GuestRegistry: builderGuestRegistry, GuestPlainHTTP: true,
	}
	if packageProxy != "" {
		c.PackageProxy = BuilderGuestPackageProxy
	}
	return c
}

// BuilderNetworks gives anvil dev's QEMU pools the builders' network: the registry, and
// the package proxy when there is one.
func BuilderNetworks(registryHost, packageProxy string) map[string]qemu.Network {
	forwards := []qemu.NetworkForward{{Guest: builderGuestRegistry, Target: registryHost}}
	if packageProxy != "" {
		forwards = append(forwards, qemu.NetworkForward{Guest: BuilderGuestPackageProxy, Target: packageProxy})
	}
	return map[string]qemu.Network{BuilderNetwork: {Forwards: forwards}}
}

// DeclareNetwork sets the entry of want's network in pool's spec.networks to want, as anvil
// dev's infrastructure admin: a network the runtime serves is reserved to what the pool
// declares. The pool is made, labelled as its poollet labels a QEMU pool, if the poollet has
// not made it yet.
func DeclareNetwork(ctx context.Context, cfg *rest.Config, pool string, want computev1alpha1.NetworkAccess) error {
	scheme, err := api.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	mp := &computev1alpha1.MachinePool{}
	if err := c.Get(ctx, client.ObjectKey{Name: pool}, mp); apierrors.IsNotFound(err) {
		mp = &computev1alpha1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: pool, Labels: map[string]string{LabelRuntime: "qemu"}},
			Spec: computev1alpha1.MachinePoolSpec{Networks: []computev1alpha1.NetworkAccess{want}}}
		if err := c.Create(ctx, mp); !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := c.Get(ctx, client.ObjectKey{Name: pool}, mp); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if i := slices.IndexFunc(mp.Spec.Networks, func(a computev1alpha1.NetworkAccess) bool { return a.Name == want.Name }); i >= 0 {
		if equality.Semantic.DeepEqual(mp.Spec.Networks[i], want) {
			return nil
		}
		mp.Spec.Networks = slices.Delete(mp.Spec.Networks, i, i+1)
	}
	patch := client.MergeFrom(mp.DeepCopy())
	mp.Spec.Networks = append(mp.Spec.Networks, want)
	return c.Patch(ctx, mp, patch)
}
