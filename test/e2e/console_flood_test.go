package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

// floodMemoryBound is how much anvil dev's resident memory may grow while a console log
// floods past its readers: the buffers of the streams in flight (gRPC's windows, grown to
// the fast follower's pace; the HTTP connections') and the garbage of the copies, which
// the collector lets grow to the live heap's size, never the flood itself. Seen: +86 MiB
// for 257 MiB of flood, +92 MiB for 513 MiB — bounded, not growing with the flood.
const floodMemoryBound = 160 << 20

// floodSize is how much the flood writes (at most, in a minute): over three times the
// bound, so a stream that kept what its caller does not read would cross it.
const floodSize = 512 << 20

// A console flooded for a minute costs the host disk, never anvil's memory (docs/console.md,
// "Bounds"). A guest cannot flood fast itself: QEMU's UARTs take its bytes at about 11 KB/s
// (the 16550 at its line's 115,200 baud) and 5 KB/s (the PL011 under emulation), so a
// minute of it is under a MiB. The test therefore writes the flood into the running guest's
// console log as QEMU writes a guest's output (appending to the file), 512 MiB as fast as
// it can, while one follower reads it through the API as fast as it can and three callers
// stop reading — a followed log, a watcher and the writer attached at the console — so the
// flood backs up on their streams. anvil dev (the console server, the poollet and the qemu
// runtime in one process) grows by less than floodMemoryBound, and the fast follower gets
// every byte.
func TestConsoleFloodHoldsAnvilsMemory(t *testing.T) {
	d, state, registryPort := startOneArchDev(t, "cf", "amd64")
	kubeconfig := filepath.Join(state, "kubeconfig")
	env.Apply(t, kubeconfig, fmt.Sprintf(`
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: flood}
capabilities: {cpu: "1", memory: 512Mi}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: flood, namespace: default}
spec: {machineClassRef: {name: flood}, image: 127.0.0.1:%s/anvil/testos:latest, architecture: amd64}
`, registryPort))
	env.WaitKubectlFor(t, kubeconfig, 5*time.Minute, "be Running", func(s string) bool { return s == "Running" },
		"get", "machine", "flood", "-o", "jsonpath={.status.state}")
	file := filepath.Join(env.QemuMachineDir(t, kubeconfig, state, "default", "flood"), qemu.ConsoleLogFile)
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(time.Second) {
		if raw, _ := os.ReadFile(file); bytes.Contains(raw, []byte("ANVIL-TESTOS-READY")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the guest never printed its ready line")
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Three callers that stop reading at once.
	stalledLog, err := consoleapi.OpenLog(ctx, cfg, "default", "flood", consoleapi.LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stalledLog.Close()
	for _, write := range []bool{false, true} {
		s, err := consoleapi.OpenSession(ctx, cfg, "default", "flood", write)
		if err != nil {
			t.Fatalf("attaching (write %t): %v", write, err)
		}
		defer s.Close()
	}
	// One that reads all it is sent.
	var read atomic.Int64
	go func() {
		_ = consoleapi.ReadLog(ctx, cfg, "default", "flood", consoleapi.LogOptions{Follow: true}, countingWriter{&read})
	}()

	pid := d.PID()
	baseline, err := measure.RSSBytes(pid)
	if err != nil {
		t.Fatal(err)
	}
	peak := baseline
	sample := func() {
		rss, err := measure.RSSBytes(pid)
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, rss)
	}
	flooded, took := floodLog(t, file, sample)
	size := fileSize(t, file)
	for read.Load() < size {
		select {
		case <-ctx.Done():
			t.Fatalf("the fast follower read %d bytes of a log of %d within 5 minutes", read.Load(), size)
		case <-time.After(250 * time.Millisecond):
		}
		sample()
	}
	t.Logf("figure console flood: %.0f MiB written in %s (%.0f MiB/s); anvil dev's memory %.1f MiB before, %.1f MiB at most (+%.1f MiB); the fast follower read all %.0f MiB",
		float64(flooded)/(1<<20), took.Round(time.Millisecond), float64(flooded)/(1<<20)/took.Seconds(),
		float64(baseline)/(1<<20), float64(peak)/(1<<20), float64(peak-baseline)/(1<<20), float64(read.Load())/(1<<20))
	if grew := peak - baseline; grew >= floodMemoryBound {
		t.Errorf("anvil dev's memory grew by %d bytes while the console flooded, want under %d", grew, floodMemoryBound)
	}
}

// floodLog appends floodSize bytes of console lines to the log file at path as fast as it
// can, for a minute at most, calling sample between chunks; it returns how much it wrote
// and in how long.
func floodLog(t *testing.T, path string, sample func()) (int64, time.Duration) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := []byte("ANVIL-FLOOD-0123456789abcdefghijklmnopqrstuvwxyz-0123456789abcdefghijklmnopqrstuvwxyz-0123456789\r\n")
	chunk := bytes.Repeat(line, (1<<20)/len(line))
	began := time.Now()
	var written int64
	for written < floodSize && time.Since(began) < time.Minute {
		n, err := f.Write(chunk)
		written += int64(n)
		if err != nil {
			t.Fatal(err)
		}
		sample()
	}
	return written, time.Since(began)
}

// countingWriter counts what it is sent.
type countingWriter struct{ n *atomic.Int64 }

func (w countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
