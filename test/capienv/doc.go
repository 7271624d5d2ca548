// Package capienv runs the real Cluster API core manager (bin/capi-manager, v1.14, built by
// `make tools` from hack/tools/capi) against a test control plane (test/harness), for the
// tests of anvil's Cluster API provider.
//
//	capi, err := capienv.Start(ctx, env.Config, capienv.Options{
//		FeatureGates: map[string]bool{"InPlaceUpdates": true, "RuntimeSDK": true}})
//	t.Cleanup(func() { _ = capi.Stop() }) // or env.BeforeStop, when started in TestMain
//	err = capienv.InstallInventory(ctx, env.Client, "capi-system") // before clusterctl move
//
// Stop the manager before the control plane stops, so that it never runs against a
// stopped apiserver; if the test binary dies first, the manager dies with it (Pdeathsig).
//
// Start installs, as clusterctl init would: Cluster API's CRDs (labelled
// clusterctl.cluster.x-k8s.io and cluster.x-k8s.io/provider=cluster-api, every version
// converting through the manager's /convert), its webhook configurations (named capi-…),
// clusterctl's inventory CRD, anvil's provider CRDs (config/crd/capi) and the ClusterRole
// that aggregates anvil's kinds into the manager's role (config/rbac/capi). The manifests
// come from bin/capi, copied out of the pinned module by `make tools`; a missing piece fails
// naming that command. The manager then runs as a child process with an admin kubeconfig:
//
//   - --webhook-port: a free port envtest picks on 127.0.0.1, with the serving certificate
//     envtest makes (--webhook-cert-dir); the webhook configurations call
//     https://127.0.0.1:<port>/<path>. Cluster API v1.14 has no flag for the webhook
//     server's host: it listens on every interface (TLS, admission and conversion only).
//   - --health-addr and --diagnostics-address (with --insecure-diagnostics: plain HTTP
//     metrics): free ports on 127.0.0.1.
//   - --feature-gates from Options.FeatureGates; leader election stays off.
//
// Start returns once /readyz answers and the webhook server completes a TLS handshake
// with the CA the apiserver trusts. Stop ends exactly that process (by PID, SIGTERM then
// SIGKILL) and is safe to call twice; to change feature gates, Stop and Start again (one
// control plane per package serves several Starts). The log is in Options.Dir
// (capi-manager.log); errors carry its last lines.
//
// It never starts anything but bin/capi-manager, never listens off loopback itself, and
// never skips: a missing binary or manifest is an error.
package capienv
