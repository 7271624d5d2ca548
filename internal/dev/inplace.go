package dev

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/anvil-dev/anvil/api"
	"github.com/anvil-dev/anvil/internal/capi/extension"
	"github.com/anvil-dev/anvil/internal/clusterapi"
	"github.com/anvil-dev/anvil/internal/controlplane"
	"github.com/anvil-dev/anvil/internal/pki"
)

// ExtensionConfigName is the ExtensionConfig anvil dev registers its in-place update
// extension with: Cluster API names its handlers <handler>.anvil.
const ExtensionConfigName = "anvil"

// clientCertValidity is how long the client certificate Cluster API's managers present to
// the extension lasts: longer than any anvil dev runs (each start makes a new one).
const clientCertValidity = 30 * 24 * time.Hour

// inPlace is anvil dev's in-place update extension (docs/capi.md, "In-place updates"): the
// flags that make Cluster API's managers call it with their client certificate, and where
// anvil's provider serves it.
type inPlace struct {
	// managerArgs go to every manager started with clusterapi.InPlaceGates: the core
	// manager and KubeadmControlPlane's both call the extension.
	managerArgs []string
	extension   extension.Options
}

// prepareInPlace writes, under dir, the client CA and the certificate Cluster API's managers
// present, and the extension's self-signed serving certificate, for an extension on a free
// loopback port.
func prepareInPlace(dir string) (inPlace, error) {
	dir = filepath.Join(dir, "in-place")
	caFile, certFile, keyFile, err := pki.WriteClientPKI(dir, clientCertValidity)
	if err != nil {
		return inPlace{}, fmt.Errorf("the in-place update extension's client certificate: %w", err)
	}
	port, err := controlplane.PortBelowEphemeral("127.0.0.1")
	if err != nil {
		return inPlace{}, fmt.Errorf("a port for the in-place update extension: %w", err)
	}
	ext := extension.Options{BindAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		CertDir: filepath.Join(dir, "serving"), ClientCAFile: caFile}
	// Made now rather than when the provider starts serving: the ExtensionConfig carries it.
	if err := extension.EnsureServingCert(ext.CertDir, ext.BindAddress); err != nil {
		return inPlace{}, err
	}
	return inPlace{managerArgs: clusterapi.RuntimeExtensionClientArgs(certFile, keyFile), extension: ext}, nil
}

// register creates or updates the ExtensionConfig naming the extension, in the apiserver of
// cfg: Cluster API then discovers its hooks (when anvil's provider serves them) and calls
// them on rollouts.
func (p inPlace) register(ctx context.Context, cfg *rest.Config) error {
	caBundle, err := os.ReadFile(filepath.Join(p.extension.CertDir, extension.CertFile))
	if err != nil {
		return err
	}
	want, err := extension.ExtensionConfig(ExtensionConfigName, p.extension.BindAddress, caBundle)
	if err != nil {
		return err
	}
	scheme, err := api.NewScheme()
	if err != nil {
		return err
	}
	if err := runtimev1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	have := &runtimev1.ExtensionConfig{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(want), have); {
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, want)
		return registered(err)
	case err != nil:
		return registered(err)
	}
	// An earlier anvil dev on the same state left one, with its own port and certificate.
	have.Spec = want.Spec
	return registered(c.Update(ctx, have))
}

func registered(err error) error {
	if err != nil {
		return fmt.Errorf("registering the in-place update extension (ExtensionConfig %s): %w", ExtensionConfigName, err)
	}
	return nil
}
