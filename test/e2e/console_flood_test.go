package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/test/scale/measure"
)

// floodScript is a tenant's first-boot script that writes to the serial console as fast as
// the guest can for a minute.
const floodScript = `#!/bin/sh
timeout 60 yes ANVIL-FLOOD-0123456789abcdefghijklmnopqrstuvwxyz-0123456789abcdefghijklmnopqrstuvwxyz-0123456789
echo ANVIL-FLOOD-DONE
`

// floodMemoryBound is how much anvil dev's resident memory may grow while a guest floods
// its console past its readers: the buffers of the streams in flight (gRPC's windows, the
// HTTP connections') and the garbage of the copies, never the flood itself.
const floodMemoryBound = 96 << 20

// A tenant's guest that floods its serial console for a minute costs the host disk, never
// anvil's memory (docs/console.md, "Bounds"): while it writes, one follower reads its log
// through the API as fast as it can, and three callers stop reading — a followed log, a
// watcher and the writer attached at its console — so the flood backs up on their
// streams. anvil dev (the console server, the poollet and the qemu runtime in one process)
// grows by less than floodMemoryBound, the log on disk by more than the bound, and the
// fast follower gets every byte.
func TestConsoleFloodHoldsAnvilsMemory(t *testing.T) {
	d, state, registryPort := startAMD64Dev(t, "cf")
	kubeconfig := filepath.Join(state, "kubeconfig")
	env.Apply(t, kubeconfig, fmt.Sprintf(`
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: flood}
capabilities: {cpu: "1", memory: 512Mi}
---
apiVersion: v1
kind: Secret
metadata: {name: flood-user-data, namespace: default}
stringData:
  userData: |
%s
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: flood, namespace: default}
spec:
  machineClassRef: {name: flood}
  image: 127.0.0.1:%s/anvil/testos:latest
  architecture: amd64
  userDataRef: {name: flood-user-data}
`, strings.TrimSuffix(indent(floodScript, 4), "\n"), registryPort))
	env.WaitKubectlFor(t, kubeconfig, 5*time.Minute, "be Running", func(s string) bool { return s == "Running" },
		"get", "machine", "flood", "-o", "jsonpath={.status.state}")
	file, err := env.Kubectl(t, kubeconfig, "", "get", "machine", "flood", "-o", "jsonpath={.status.console}")
	if err != nil || file == "" {
		t.Fatalf("the Machine's console file: %v %q", err, file)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
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
	// One that reads all it is sent, until the script's end.
	var read atomic.Int64
	fast := &floodFollower{n: &read, done: make(chan struct{})}
	go func() {
		_ = consoleapi.ReadLog(ctx, cfg, "default", "flood", consoleapi.LogOptions{Follow: true}, fast)
	}()

	pid := d.PID()
	baseline, err := measure.RSSBytes(pid)
	if err != nil {
		t.Fatal(err)
	}
	start := fileSize(t, file)
	began, peak := time.Now(), baseline
	for waiting := true; waiting; {
		select {
		case <-fast.done:
			waiting = false
		case <-ctx.Done():
			t.Fatalf("the guest's flood did not end within 6 minutes (log %d bytes, %d read)", fileSize(t, file), read.Load())
		case <-time.After(250 * time.Millisecond):
		}
		rss, err := measure.RSSBytes(pid)
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, rss)
	}
	flooded := fileSize(t, file) - start
	took := time.Since(began)
	t.Logf("figure console flood: the guest wrote %.1f MiB in %s (%.2f MiB/s); anvil dev's memory %.1f MiB before, %.1f MiB at most (+%.1f MiB); the fast follower read %.1f MiB",
		float64(flooded)/(1<<20), took.Round(time.Second), float64(flooded)/(1<<20)/took.Seconds(),
		float64(baseline)/(1<<20), float64(peak)/(1<<20), float64(peak-baseline)/(1<<20), float64(read.Load())/(1<<20))
	if flooded <= floodMemoryBound {
		t.Errorf("the flood wrote %d bytes, not more than the bound (%d): the test shows nothing", flooded, floodMemoryBound)
	}
	if grew := peak - baseline; grew >= floodMemoryBound {
		t.Errorf("anvil dev's memory grew by %d bytes while the guest flooded its console, want under %d", grew, floodMemoryBound)
	}
	// The fast follower saw the script end, so it read the log through to there.
	if read.Load() < start+flooded-64 {
		t.Errorf("the fast follower read %d bytes of a log of %d", read.Load(), start+flooded)
	}
}

// floodFollower counts what it is sent and closes done once the flood script's end comes.
type floodFollower struct {
	n    *atomic.Int64
	tail []byte
	done chan struct{}
	seen bool
}

func (f *floodFollower) Write(p []byte) (int, error) {
	f.n.Add(int64(len(p)))
	// The marker may be split between two writes: keep the last few bytes.
	f.tail = append(f.tail[max(0, len(f.tail)-32):], p...)
	if !f.seen && bytes.Contains(f.tail, []byte("ANVIL-TESTOS-SCRIPT-END")) {
		f.seen = true
		close(f.done)
	}
	f.tail = f.tail[max(0, len(f.tail)-32):]
	return len(p), nil
}

var _ io.Writer = (*floodFollower)(nil)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
