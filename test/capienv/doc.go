// Package capienv runs Cluster API's real managers against a test control plane
// (test/harness), for the tests of anvil's Cluster API provider: the core manager
// (bin/capi-manager, v1.14) and, with Options.Kubeadm, the kubeadm bootstrap provider and
// KubeadmControlPlane (bin/capi-kubeadm-bootstrap, bin/capi-kubeadm-control-plane), all built
// by `make tools` from hack/tools/capi.
//
//	capi, err := capienv.Start(ctx, env.Config, capienv.Options{Kubeadm: true,
//		FeatureGates: map[string]bool{"InPlaceUpdates": true, "RuntimeSDK": true}})
//	t.Cleanup(func() { _ = capi.Stop() }) // or env.BeforeStop, when started in TestMain
//	err = capienv.InstallInventory(ctx, env.Client, "capi-system") // before clusterctl move
//
// Stop the managers before the control plane stops, so that they never run against a
// stopped apiserver; if the test binary dies first, they die with it (Pdeathsig).
//
// Start installs anvil's provider CRDs (config/crd/capi) and the ClusterRole that aggregates
// anvil's kinds into the manager's role (config/rbac/capi), then runs the managers through
// internal/clusterapi, the code `anvil dev --capi` runs them with: each provider's CRDs
// labelled clusterctl.cluster.x-k8s.io and cluster.x-k8s.io/provider=<clusterctl's name>
// (cluster-api, bootstrap-kubeadm, control-plane-kubeadm), every version converting through
// that provider's own webhook server; its webhook configurations named with clusterctl's
// prefix (capi-, capi-kubeadm-bootstrap-, capi-kubeadm-control-plane-) and calling
// https://127.0.0.1:<its port> with a certificate of a CA made for it; health and metrics on
// 127.0.0.1; --feature-gates to every manager, Options.Args to the core manager only. The
// manifests come from bin/capi/<provider>, copied out of the pinned module by `make tools`;
// a missing piece fails naming that command.
//
// The kubeadm providers are off by default: only tests that make KubeadmConfigs or
// KubeadmControlPlanes need them (test/capi runs them for its whole package); test/capiguest
// and the pivot targets run the core manager alone. Starting all three took about 9 s here,
// the core manager alone 3.5 to 7 s (two processes more, started side by side).
//
// Start returns once every manager's /readyz answers and its webhook server completes a TLS
// handshake with the CA the apiserver trusts. Stop ends exactly those processes (by PID,
// SIGTERM then SIGKILL) and is safe to call twice; to change feature gates, Stop and Start
// again (one control plane per package serves several Starts). The logs are in Options.Dir
// (capi-manager.log, capi-kubeadm-bootstrap.log, capi-kubeadm-control-plane.log); errors
// carry their last lines.
//
// It never starts anything but those binaries, never listens off loopback itself, and never
// skips: a missing binary or manifest is an error.
package capienv
