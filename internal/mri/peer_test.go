package mri

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// countingRuntime counts the calls that reached it, and keeps the first-boot data it got.
type countingRuntime struct {
	mriv1alpha1.UnimplementedMachineRuntimeServer
	calls     atomic.Int32
	firstBoot atomic.Value
}

func (r *countingRuntime) Status(context.Context, *mriv1alpha1.StatusRequest) (*mriv1alpha1.StatusResponse, error) {
	r.calls.Add(1)
	return &mriv1alpha1.StatusResponse{}, nil
}

func (r *countingRuntime) CreateMachine(_ context.Context, req *mriv1alpha1.CreateMachineRequest) (*mriv1alpha1.CreateMachineResponse, error) {
	r.calls.Add(1)
	r.firstBoot.Store(string(req.GetMachine().GetSpec().GetFirstBoot().GetData()))
	return &mriv1alpha1.CreateMachineResponse{Machine: req.GetMachine()}, nil
}

// serve runs rt on a socket in a fresh folder with the given server options.
func serve(t *testing.T, rt mriv1alpha1.MachineRuntimeServer, opts ...Option) string {
	t.Helper()
	endpoint := "unix://" + filepath.Join(t.TempDir(), "run", "rt.sock")
	l, err := Listen(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, l, rt, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return endpoint
}

func call(t *testing.T, endpoint string, opts ...Option) error {
	t.Helper()
	c, conn, err := Dial(endpoint, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.CreateMachine(ctx, &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
		Spec: &mriv1alpha1.MachineSpec{FirstBoot: &mriv1alpha1.FirstBootConfig{Data: []byte("tenant-secret")}}}})
	return err
}

// The attacks: a process of another user dials a runtime's socket (the runtime sees the
// caller's uid through SO_PEERCRED and refuses it before any call), and a runtime of
// another user squats the path a poollet dials (the poollet refuses it before sending a
// Machine's first-boot Secret). Another uid is played by allow-lists that leave the
// test's own uid out: the uid checked is the kernel's answer for the real peer.
func TestPeersOfAnotherUserAreRefused(t *testing.T) {
	other := uint32(os.Getuid()) + 4242

	rt := &countingRuntime{}
	if err := call(t, serve(t, rt)); err != nil {
		t.Fatalf("a peer of the same user: %v", err)
	}
	if rt.calls.Load() != 1 {
		t.Fatalf("the runtime got %d calls, want 1", rt.calls.Load())
	}

	guarded := &countingRuntime{}
	err := call(t, serve(t, guarded, OnlyPeers(other)))
	if err == nil || guarded.calls.Load() != 0 {
		t.Errorf("a client of a uid the runtime does not allow: err %v, %d calls reached the runtime", err, guarded.calls.Load())
	}

	squatter := &countingRuntime{}
	err = call(t, serve(t, squatter, AllowPeers(other)), OnlyPeers(other))
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a runtime of a uid the poollet does not allow: %v, want refused", err)
	}
	if got := squatter.firstBoot.Load(); got != nil {
		t.Errorf("the squatting runtime received the first-boot data %q", got)
	}
}

// Listen refuses a socket folder anyone else can write to, such as /tmp.
func TestListenRefusesAFolderOthersCanWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix://" + filepath.Join(dir, "rt.sock")); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("Listen in a world-writable folder: %v", err)
	}
	fresh := filepath.Join(t.TempDir(), "run", "anvil")
	l, err := Listen("unix://" + filepath.Join(fresh, "rt.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	fi, err := os.Stat(fresh)
	if err != nil || fi.Mode().Perm()&0o027 != 0 {
		t.Errorf("the folder Listen made: %v, %v; want no group write and nothing for others", fi.Mode(), err)
	}
}

func TestSocketDirProblem(t *testing.T) {
	const self = 1000
	for _, tc := range []struct {
		name  string
		isDir bool
		owner uint32
		perm  fs.FileMode
		want  string
	}{
		{"own, 0750", true, self, 0o750, ""},
		{"own, 0700", true, self, 0o700, ""},
		{"root's, 0755", true, 0, 0o755, ""},
		{"another user's", true, 1001, 0o700, "belongs to uid 1001"},
		{"group-writable", true, self, 0o770, "writable by others"},
		{"world-writable", true, 0, 0o777, "writable by others"},
		{"a file", false, self, 0o600, "not a folder"},
	} {
		err := socketDirProblem("/d", tc.isDir, tc.owner, self, tc.perm)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// poolRuntime serves Version naming its pool, and counts Status calls.
type poolRuntime struct {
	countingRuntime
	pool string
}

func (r *poolRuntime) Version(context.Context, *mriv1alpha1.VersionRequest) (*mriv1alpha1.VersionResponse, error) {
	return &mriv1alpha1.VersionResponse{RuntimeName: "test", MriVersion: "v1alpha1", Pool: r.pool}, nil
}

// A client for pool "a" calls a runtime of pool "a"; the socket is then served by a
// runtime of pool "b" (restarted with another --name, or another runtime took the path):
// once the connection was lost, the client asks again, and refuses "b" before any call.
func TestPoolRefusesAnotherPoolsRuntime(t *testing.T) {
	endpoint := "unix://" + filepath.Join(t.TempDir(), "run", "rt.sock")
	start := func(rt mriv1alpha1.MachineRuntimeServer) func() {
		l, err := Listen(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ServeListener(ctx, l, rt, Pool(rt.(*poolRuntime).pool)) }()
		return func() { cancel(); <-done }
	}
	c, conn, err := Dial(endpoint, Pool("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	status := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Status(ctx, &mriv1alpha1.StatusRequest{})
		return err
	}

	a := &poolRuntime{pool: "a"}
	stopA := start(a)
	if err := status(); err != nil || a.calls.Load() != 1 {
		t.Fatalf("the runtime of pool a: %v, %d calls", err, a.calls.Load())
	}
	stopA()

	b := &poolRuntime{pool: "b"}
	defer start(b)()
	err = wait(func() error { return status() }, func(err error) bool { return IsWrongPool(err) })
	if !IsWrongPool(err) || !strings.Contains(err.Error(), "serves pool b,") {
		t.Fatalf("a call to pool b's runtime: %v, want the wrong-pool refusal", err)
	}
	if b.calls.Load() != 0 {
		t.Errorf("%d calls reached the runtime of another pool", b.calls.Load())
	}
}

// wait repeats call until done(err) holds or 10 s pass, and returns its last error.
func wait(call func() error, done func(error) bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := call()
		if done(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
