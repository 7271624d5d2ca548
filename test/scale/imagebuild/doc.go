// Command imagebuild measures the wall time from a change to an OSImage's common steps to
// its published index (amd64 and arm64 rebuilt in parallel on QEMU builder VMs of their own
// architecture), against the same builders run by hand: each architecture's builder image
// and job started as a plain Machine, alone, timed from its creation to the agent's result
// line. Rounds alternate anvil and by hand on one control plane, registry and pair of pools.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go run ./test/scale/imagebuild -rounds 3
//
// It needs make testos and make agents. The figures are printed as JSON, never asserted.
package main
