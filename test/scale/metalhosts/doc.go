// Command metalhosts measures how long anvil takes to bring N Hosts from creation to
// Provisioned on Ironic's fake hardware, against the same Ironic API sequence scripted
// directly (enroll, port, manage, inspect, provide, instance_info, deploy) on the same
// Ironic, with the same concurrency and poll interval, in one run:
//
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./test/scale/metalhosts -hosts 200 -rounds 3
//
// Each round runs both paths, alternating which goes first, each on an empty Ironic. The
// figures (seconds, ratio anvil/direct, per-phase times and Ironic request counts) are
// printed one line each, never asserted.
package main
