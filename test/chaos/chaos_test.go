package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// The short chaos run of make test: about two minutes of churn on the fake, QEMU and
// metal pools, the metal pool with one emulated amd64 server beside its fake hardware,
// with the manager, the fake and QEMU pools' poollets and runtimes, Ironic, kube-apiserver
// and the BMC emulator killed at least once, from a fixed seed. make chaos runs the long one.
func TestChaosShort(t *testing.T) {
	cfg := config{seed: 16, duration: 100 * time.Second, machines: 60, vms: 1, metal: true, servers: 1, workers: 8,
		converge: 4 * time.Minute, extraKills: 1, out: os.Stdout,
		kills: map[target]int{targetManager: 1, targetPoollet: 2, targetRuntime: 2, targetIronic: 1, targetAPIServer: 1, targetEmulator: 1}}
	rep, err := setupAndRun(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.findings.zero() || rep.convergedAfter < 0 {
		t.Errorf("the run did not end as asked: %+v", rep.findings)
	}
	if len(rep.exitedAlone) > 0 {
		t.Errorf("processes ended without being killed: %v", rep.exitedAlone)
	}
}
