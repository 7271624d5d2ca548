// Command anvil-node-agent makes the machine it runs on a Node of a workload cluster, as a
// kubelet's TLS bootstrap and heartbeats would, without running Pods (see test/nodeagent
// and docs/capi.md). It is a small static binary of its own, one per GOARCH, packed into the
// node image's initramfs: the test OS runs it from a first-boot script.
//
//	anvil-node-agent --server https://10.0.2.100:6443 --ca-file /run/ca.crt --token abcdef.0123456789abcdef \
//	    [--node-name N] [--provider-id anvil://ns/name] [--labels k=v,...]
//
// The node name and provider ID default to the first-boot metadata's local-hostname and
// provider-id. It prints nodeagent.RegisteredLine once the Node is Ready, exits 0 on SIGTERM
// (marking nothing) and 1 when the node cannot be registered.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/anvil-dev/anvil/test/nodeagent"
)

func main() {
	os.Exit(run())
}

func run() int {
	var cfg nodeagent.Config
	var caFile, labels, metadata string
	flag.StringVar(&cfg.Server, "server", "", "the apiserver's URL as this machine reaches it (https://HOST:PORT)")
	flag.StringVar(&caFile, "ca-file", "", "the apiserver's CA certificate (PEM)")
	flag.StringVar(&cfg.Token, "token", "", "a bootstrap token (id.secret) of the cluster")
	flag.StringVar(&cfg.NodeName, "node-name", "", "the Node's name (default: the metadata's local-hostname, else the host name)")
	flag.StringVar(&cfg.ProviderID, "provider-id", "", "the Node's spec.providerID (default: the metadata's provider-id)")
	flag.StringVar(&labels, "labels", "", "more labels of the Node, k=v,k2=v2")
	flag.StringVar(&cfg.CertDir, "cert-dir", "/var/lib/anvil-node-agent", "where the node's key and certificate are kept (\"\" keeps nothing)")
	flag.StringVar(&metadata, "metadata", strings.Join(nodeagent.DefaultMetadataFiles, ","), "first-boot metadata files, the first that exists is read (comma-separated)")
	flag.DurationVar(&cfg.LeaseInterval, "lease-interval", nodeagent.DefaultLeaseInterval, "how often the Lease is renewed (below the cluster's node monitor grace period)")
	flag.DurationVar(&cfg.StatusInterval, "status-interval", nodeagent.DefaultStatusInterval, "how often the status is posted when unchanged")
	flag.Parse()
	if flag.NArg() != 0 {
		return fail(fmt.Errorf("unexpected arguments %q: every setting is a flag", flag.Args()))
	}
	cfg.Out, cfg.Log = os.Stdout, os.Stderr

	var err error
	if cfg.Labels, err = nodeagent.ParseLabels(labels); err != nil {
		return fail(err)
	}
	if caFile != "" {
		if cfg.CA, err = os.ReadFile(caFile); err != nil {
			return fail(fmt.Errorf("--ca-file: %w", err))
		}
	}
	var files []string
	if metadata != "" {
		files = strings.Split(metadata, ",")
	}
	md, from, err := nodeagent.ReadMetadata(files)
	if err != nil {
		return fail(fmt.Errorf("the first-boot metadata: %w", err))
	}
	cfg.Complete(md)
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	if from != "" {
		fmt.Fprintf(os.Stderr, "anvil-node-agent: metadata from %s\n", from)
	}
	fmt.Fprintf(os.Stderr, "anvil-node-agent: registering node %s (provider ID %s) with %s\n", cfg.NodeName, cfg.ProviderID, cfg.Server)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := nodeagent.Run(ctx, cfg); err != nil {
		return fail(err)
	}
	return 0
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "anvil-node-agent:", err)
	return 1
}
