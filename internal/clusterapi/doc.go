// Package clusterapi runs Cluster API's own managers (the core manager and, when asked, the
// kubeadm bootstrap and control-plane providers, v1.14, built by `make tools` from
// hack/tools/capi) as child processes against a control plane, installed as clusterctl init
// would install them. `anvil dev --capi` and the Cluster API tests (test/capienv) use it: one
// way to run them.
//
//	m, err := clusterapi.Start(ctx, cfg, clusterapi.Options{BinDir: "bin",
//		Providers: clusterapi.WithKubeadm})
//	defer m.Stop()
//
// For each provider of Options.Providers (a row of Providers: clusterctl's name, binary,
// manifests, webhook name prefix) Start installs, as clusterctl init would: its CRDs from
// bin/capi/<name>/crd, labelled clusterctl.cluster.x-k8s.io and cluster.x-k8s.io/provider=<name>,
// every version converting through that provider's own /convert; its webhook configurations
// from bin/capi/<name>/webhook, renamed with clusterctl's prefix (capi-,
// capi-kubeadm-bootstrap-, capi-kubeadm-control-plane-) and calling
// https://127.0.0.1:<its port>/<path>; once, clusterctl's inventory CRD. Each provider then
// runs with an admin kubeconfig and:
//
//   - --webhook-port: a free port on 127.0.0.1 and the serving certificate of a CA made for
//     that provider (internal/controlplane's WriteServingCert, into --webhook-cert-dir as
//     tls.crt and tls.key). Cluster API v1.14 has no flag for the webhook server's host: it
//     listens on every interface (TLS, admission and conversion only).
//   - --health-addr and --diagnostics-address (with --insecure-diagnostics: plain HTTP
//     metrics): free ports on 127.0.0.1.
//   - --feature-gates from Options.FeatureGates (all providers); Options.Args (the core
//     manager only); leader election stays off.
//
// Start returns once every provider's /readyz answers and its webhook server completes a TLS
// handshake with the CA the apiserver trusts. The processes run under
// internal/controlplane's supervisor (a process group of their own; Pdeathsig, so they die
// with the process that started them). Stop ends exactly those processes (by PID, SIGTERM
// then SIGKILL) and is safe to call twice. Logs are <Dir>/<binary>.log; errors carry their
// last lines.
//
// InstallAnvilProvider installs anvil's provider CRDs and the ClusterRole that aggregates
// anvil's kinds into Cluster API's manager role; InstallInventory records providers as
// clusterctl init does. It never starts anything but the binaries of Providers, never listens
// off loopback itself, and never falls back: a missing binary or manifest is an error that
// names `make tools`. It never imports controller-runtime's envtest (nor its internal/testing):
// the anvil binary links this package, and envtest's init panics on a read-only root
// filesystem, as in anvil's Pods (cmd/anvil's TestBinaryLinksNoTestPackages).
package clusterapi
