package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/internal/runtime/qemu"
	"github.com/anvil-dev/anvil/test/devproc"
	"github.com/anvil-dev/anvil/test/scale/measure"
	"github.com/anvil-dev/anvil/test/testos"
)

// BenchmarkConsole takes docs/console.md's figures on a just-booted test OS guest (amd64,
// anvil dev's own QEMU pool), each side by side with its floor, alternating in one run:
// the console log through the API (kube-apiserver, the console server, the poollet, the
// runtime) against reading the log file on the host — first byte and the whole log of the
// boot, then the throughput of a log made 16 MiB long —; and attach -> the echo of a typed
// line through the API against the same through QEMU's console socket directly. Medians
// are reported; nothing is asserted.
//
//	go test -run '^$' -bench Console -benchtime 1x ./test/e2e
func BenchmarkConsole(b *testing.B) {
	const rounds = 9
	_, state, registryPort := startOneArchDev(b, "cb", "amd64")
	kubeconfig := filepath.Join(state, "kubeconfig")
	env.Apply(b, kubeconfig, fmt.Sprintf(`
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: console-bench}
capabilities: {cpu: "1", memory: 512Mi}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: Machine
metadata: {name: console-bench, namespace: default}
spec: {machineClassRef: {name: console-bench}, image: 127.0.0.1:%s/anvil/testos:latest, architecture: amd64}
`, registryPort))
	env.WaitKubectlFor(b, kubeconfig, 5*time.Minute, "Running", func(s string) bool { return s == "Running" },
		"get", "machine", "console-bench", "-o", "jsonpath={.status.state}")
	file := filepath.Join(env.QemuMachineDir(b, kubeconfig, state, "default", "console-bench"), qemu.ConsoleLogFile)
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(time.Second) {
		raw, _ := os.ReadFile(file)
		if bytes.Contains(raw, []byte("ANVIL-TESTOS-READY")) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the guest never printed its ready line: %q", raw)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	path := "/apis/subresources.compute.anvil.dev/v1alpha1/namespaces/default/machines/console-bench/consolelog"
	ctx := context.Background()

	var apiFirst, apiAll, fileFirst, fileAll, apiEcho, socketEcho []float64
	size := 0
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		first, all, n, err := timedRead(func() (io.ReadCloser, error) { return cs.CoreV1().RESTClient().Get().AbsPath(path).Stream(ctx) })
		if err != nil {
			b.Fatalf("the log through the API: %v", err)
		}
		apiFirst, apiAll, size = append(apiFirst, first), append(apiAll, all), n
		first, all, _, err = timedRead(func() (io.ReadCloser, error) { return os.Open(file) })
		if err != nil {
			b.Fatal(err)
		}
		fileFirst, fileAll = append(fileFirst, first), append(fileAll, all)

		echo, err := echoThroughAPI(ctx, cfg, fmt.Sprintf("api-%d", i))
		if err != nil {
			b.Fatalf("attach through the API: %v", err)
		}
		apiEcho = append(apiEcho, echo)
		echo, err = echoThroughSocket(filepath.Join(filepath.Dir(file), qemu.ConsoleSocketFile), fmt.Sprintf("socket-%d", i))
		if err != nil {
			b.Fatalf("attach to QEMU's socket: %v", err)
		}
		socketEcho = append(socketEcho, echo)
	}
	// Throughput: the log made 16 MiB long (lines appended to its file, as a guest that
	// talks a lot over a long life would have it), read whole each way.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	line := bytes.Repeat([]byte("0123456789abcdef"), 7)
	line = append(line, '\n')
	for written := 0; written < 16<<20; written += len(line) {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
	}
	f.Close()
	var apiBig, fileBig []float64
	bigSize := 0
	for i := 0; i < rounds; i++ {
		_, all, n, err := timedRead(func() (io.ReadCloser, error) { return cs.CoreV1().RESTClient().Get().AbsPath(path).Stream(ctx) })
		if err != nil {
			b.Fatalf("the long log through the API: %v", err)
		}
		apiBig, bigSize = append(apiBig, all), n
		_, all, _, err = timedRead(func() (io.ReadCloser, error) { return os.Open(file) })
		if err != nil {
			b.Fatal(err)
		}
		fileBig = append(fileBig, all)
	}
	b.StopTimer()
	mibps := func(xs []float64) float64 { return float64(bigSize) / measure.Median(xs) / (1 << 20) }
	b.ReportMetric(float64(bigSize), "long-log-bytes")
	b.ReportMetric(mibps(apiBig), "api-MiB/s")
	b.ReportMetric(mibps(fileBig), "file-MiB/s")
	ms := func(xs []float64) float64 { return measure.Median(xs) * 1000 }
	b.ReportMetric(float64(size), "log-bytes")
	b.ReportMetric(ms(apiFirst), "api-first-byte-ms")
	b.ReportMetric(ms(fileFirst), "file-first-byte-ms")
	b.ReportMetric(ms(apiAll), "api-whole-log-ms")
	b.ReportMetric(ms(fileAll), "file-whole-log-ms")
	b.ReportMetric(ms(apiEcho), "api-attach-to-echo-ms")
	b.ReportMetric(ms(socketEcho), "socket-attach-to-echo-ms")
	b.Logf("rounds %d; spreads (min-max ms): api first byte %.1f-%.1f, file first byte %.3f-%.3f, api echo %.0f-%.0f, socket echo %.0f-%.0f",
		rounds, 1000*slices.Min(apiFirst), 1000*slices.Max(apiFirst), 1000*slices.Min(fileFirst), 1000*slices.Max(fileFirst),
		1000*slices.Min(apiEcho), 1000*slices.Max(apiEcho), 1000*slices.Min(socketEcho), 1000*slices.Max(socketEcho))
}

// timedRead opens a log and reads it whole: seconds to its first byte and to its end.
func timedRead(open func() (io.ReadCloser, error)) (first, all float64, n int, err error) {
	start := time.Now()
	r, err := open()
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 && n == 0 {
			first = time.Since(start).Seconds()
		}
		n += k
		if err == io.EOF {
			return first, time.Since(start).Seconds(), n, nil
		}
		if err != nil {
			return 0, 0, 0, err
		}
	}
}

// echoThroughAPI attaches as anvil console does and types a line: seconds from the
// attach to its echo.
func echoThroughAPI(ctx context.Context, cfg *rest.Config, token string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	in, typing := io.Pipe()
	seen := &watchFor{token: []byte(token), seen: make(chan struct{})}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- consoleapi.Attach(ctx, cfg, "default", "console-bench", in, seen) }()
	if _, err := io.WriteString(typing, "echo "+token+"\r"); err != nil {
		return 0, err
	}
	select {
	case <-seen.seen:
	case err := <-done:
		return 0, fmt.Errorf("the session ended before the echo: %v", err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	took := time.Since(start).Seconds()
	typing.Close() // stdin closed: the session ends
	if err := <-done; err != nil {
		return 0, err
	}
	return took, nil
}

// watchFor is a console's output, closing seen once token has come.
type watchFor struct {
	token []byte
	seen  chan struct{}

	mu     sync.Mutex
	got    bytes.Buffer
	closed bool
}

func (w *watchFor) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.got.Write(p); !w.closed && bytes.Contains(w.got.Bytes(), w.token) {
		close(w.seen)
		w.closed = true
	}
	return len(p), nil
}

// echoThroughSocket is the floor: QEMU's console socket, typed at directly.
func echoThroughSocket(socket, token string) (float64, error) {
	start := time.Now()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "echo "+token+"\r"); err != nil {
		return 0, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for !bytes.Contains(got.Bytes(), []byte(token)) {
		n, err := conn.Read(buf)
		if err != nil {
			return 0, err
		}
		got.Write(buf[:n])
	}
	return time.Since(start).Seconds(), nil
}

// startOneArchDev starts an anvil dev of one QEMU pool (of arch), no fake or metal pool,
// in a new state folder named after prefix (short: QMP and console sockets live under it),
// and returns it, the folder and its registry's port; its guests are ended with the test.
func startOneArchDev(tb testing.TB, prefix, arch string) (*devproc.Dev, string, string) {
	tb.Helper()
	state, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { devproc.KillQemu(state); os.RemoveAll(state) })
	registryPort := devproc.FreePort(tb)
	d := env.StartDev(tb, "--state-dir", state, "--bin-dir", env.BinDir, "--fake-pool", "", "--metal-pool=false",
		"--qemu-architectures", arch,
		"--apiserver-port", devproc.FreePort(tb), "--etcd-port", devproc.FreePort(tb), "--etcd-peer-port", devproc.FreePort(tb),
		"--registry-port", registryPort, "--test-os", testos.Dir(tb))
	tb.Cleanup(func() { d.Stop(syscall.SIGTERM) })
	return d, state, registryPort
}
