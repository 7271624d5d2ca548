package manager

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/anvil-dev/anvil/internal/consoleapi"
)

// addConsoleServer serves Machines' consoles (docs/console.md) on address, on every replica
// behind the Service anvil-console, with the certificate the replicas share
// (consoleapi.ServingSecret), and writes that certificate's CA into the APIService.
func addConsoleServer(mgr ctrl.Manager, cfg *rest.Config, address string) error {
	// Only reads of the cluster's settings and the Secret: the manager has not started.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serving, err := consoleapi.SharedServing(ctx, mgr.GetClient(), mgr.GetAPIReader(), consoleapi.ServingSecret)
	if err != nil {
		return err
	}
	server, err := consoleapi.New(ctx, cfg, mgr.GetAPIReader(), address, serving)
	if err != nil {
		return fmt.Errorf("the console server: %w", err)
	}
	if err := mgr.Add(server); err != nil {
		return err
	}
	return mgr.Add(consoleapi.CABundlePublisher{Client: mgr.GetClient(), CABundle: serving.CABundle})
}
