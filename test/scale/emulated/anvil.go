package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/bmcemu"
	"github.com/anvil-dev/anvil/internal/manager"
	"github.com/anvil-dev/anvil/internal/metal/pool"
	"github.com/anvil-dev/anvil/internal/metal/site"
	"github.com/anvil-dev/anvil/internal/osimage"
	"github.com/anvil-dev/anvil/internal/provisioner"
	"github.com/anvil-dev/anvil/internal/registrynet"
	"github.com/anvil-dev/anvil/test/harness"
	"github.com/anvil-dev/anvil/test/metalpool"
)

const poolName, className = "emulated", "emulated-small"

// anvilPath is anvil's side: a BMC emulator whose servers are Hosts of a metal pool, the
// manager and the pool's poollet, all in this process.
type anvilPath struct {
	env     *harness.Env
	bmc     *bmcemu.Emulator
	pool    *metalpool.Running
	names   []string
	image   string
	version func() string
	cancel  context.CancelFunc
	done    chan error
}

// stopEmulator stops the BMC and ends its servers, which would outlive it.
func stopEmulator(e *bmcemu.Emulator) {
	_ = e.Close()
	_ = bmcemu.PowerOffAll(e.Config().StateDir)
}

// newEmulator starts a BMC emulator with n servers named prefix-1..n.
func newEmulator(dir, prefix string, n int, memoryMiB int64, macByte int) (*bmcemu.Emulator, []bmcemu.Spec, string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return nil, nil, "", err
	}
	password := hex.EncodeToString(b)
	specs := make([]bmcemu.Spec, n)
	for i := range specs {
		specs[i] = bmcemu.Spec{Name: fmt.Sprintf("%s-%d", prefix, i+1), CPUs: 1, MemoryMiB: memoryMiB, DiskGiB: 2,
			MAC: fmt.Sprintf("52:54:00:%02x:00:%02x", macByte, i+1)}
	}
	e, err := bmcemu.Start(bmcemu.Config{StateDir: dir, Username: "admin", Password: password, Servers: specs, Logger: logr.Discard()})
	return e, specs, password, err
}

func startAnvil(ctx context.Context, env *harness.Env, o options, state, testOS, eraser string) (*anvilPath, error) {
	a := &anvilPath{env: env}
	e, specs, password, err := newEmulator(filepath.Join(state, "anvil-servers"), "anvil", o.servers, o.memoryMiB, 0xa0)
	if err != nil {
		return nil, err
	}
	a.bmc = e
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bmc"},
			Data: map[string][]byte{"username": []byte("admin"), "password": []byte(password)}},
		&metalv1alpha1.HostPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "tenant"},
			Spec: metalv1alpha1.HostPolicySpec{Namespaces: []string{namespace}}},
		&computev1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Capabilities: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", o.memoryMiB))}},
	}
	for _, s := range specs {
		a.names = append(a.names, s.Name)
		objs = append(objs, &metalv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: s.Name},
			Spec: metalv1alpha1.HostSpec{
				BMC:            metalv1alpha1.BMC{Address: e.Address(s.Name), CredentialsSecretRef: &metalv1alpha1.SecretReference{Name: "bmc"}},
				BootMACAddress: s.MAC, Architecture: computev1alpha1.ArchitectureAMD64, BootMode: metalv1alpha1.BootModeLegacy}})
	}
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	if a.image, _, err = osimage.PushDirs(ctx, env.Registry.Host+"/bench/testos:1", map[computev1alpha1.Architecture]string{"amd64": testOS}, nil); err != nil {
		return nil, err
	}

	var inner provisioner.Provisioner
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a.pool, err = metalpool.Start(startCtx, env.Config, env.Client, pool.Config{
		Site: site.Config{RestConfig: env.Config, Namespace: namespace, StateDir: filepath.Join(state, "pool"),
			MaxConcurrentDeploy: o.maxDeploy, BusyPoll: time.Second, Logger: logr.Discard(),
			Wipe:            site.Wipe{Method: site.WipeEraser, EraserDir: eraser},
			WrapProvisioner: func(p provisioner.Provisioner) provisioner.Provisioner { inner = p; return p }},
		Name: poolName, ImageCacheDir: filepath.Join(state, "pool", "cache"), ImageCache: osimage.CacheOptions{Network: registrynet.Policy{Allow: registrynet.Loopback}}, Logger: logr.Discard(),
	}, 2*time.Second)
	if err != nil {
		stopEmulator(e)
		return nil, err
	}
	a.version = func() string {
		if v, ok := inner.(interface{ Microversion() string }); ok {
			return v.Microversion()
		}
		return "?"
	}
	if err := a.startManager(); err != nil {
		a.stop()
		return nil, err
	}
	if err := a.waitHosts(ctx, 5*time.Minute, func(h *metalv1alpha1.Host) bool { return free(h) }); err != nil {
		a.stop()
		return nil, fmt.Errorf("the Hosts never became Available: %w", err)
	}
	return a, nil
}

// startManager runs anvil's manager (the scheduler and the rest) in this process.
func (a *anvilPath) startManager() error {
	mo := manager.DefaultOptions()
	mo.AllowRegistry = []string{a.env.Registry.Host} // the test's registry, on loopback
	mo.MetricsAddr, mo.HealthAddr, mo.SkipControllerNameValidation = "0", "0", true
	mgr, err := manager.New(a.env.Config, mo)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan error, 1)
	go func() { a.done <- mgr.Start(ctx) }()
	return nil
}

func (a *anvilPath) microversion() string { return a.version() }

func (a *anvilPath) stop() {
	if a.cancel != nil {
		a.cancel()
		<-a.done
	}
	_ = a.pool.Stop()
	stopEmulator(a.bmc)
}

// round creates one Machine per server at once and returns the seconds from the first
// create until every Machine's marker is on some server's console.
func (a *anvilPath) round(ctx context.Context, r int) (float64, error) {
	markers := make([]string, len(a.names))
	start := time.Now()
	for i := range a.names {
		markers[i] = fmt.Sprintf("anvil-r%d-%d", r, i+1)
		ud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: markers[i]},
			Data: map[string][]byte{"userData": []byte("#cloud-config\n# anvil-marker=" + markers[i] + "\n")}}
		m := &computev1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: markers[i]},
			Spec: computev1alpha1.MachineSpec{MachineClassRef: computev1alpha1.MachineClassReference{Name: className}, Image: a.image,
				UserDataRef: &computev1alpha1.SecretKeySelector{Name: ud.Name, Key: "userData"}}}
		if err := a.env.Client.Create(ctx, ud); err != nil {
			return 0, err
		}
		if err := a.env.Client.Create(ctx, m); err != nil {
			return 0, err
		}
	}
	consoles := make([]string, len(a.names))
	for i, n := range a.names {
		consoles[i] = a.bmc.ConsolePath(n)
	}
	if err := waitMarkers(ctx, consoles, markers); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// cleanup deletes the round's Machines and waits until every Host is free again.
func (a *anvilPath) cleanup(ctx context.Context) error {
	var ms computev1alpha1.MachineList
	if err := a.env.Client.List(ctx, &ms, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range ms.Items {
		if err := client.IgnoreNotFound(a.env.Client.Delete(ctx, &ms.Items[i])); err != nil {
			return err
		}
	}
	return a.waitHosts(ctx, 5*time.Minute, free)
}

// free: an Available Host no Machine holds.
func free(h *metalv1alpha1.Host) bool {
	return h.Status.ProvisioningState == metalv1alpha1.StateAvailable && h.Spec.ConsumerRef == nil && h.Status.Image == nil
}

// waitHosts waits until cond holds for every Host, saying where the others are if not.
func (a *anvilPath) waitHosts(ctx context.Context, timeout time.Duration, cond func(*metalv1alpha1.Host) bool) error {
	var hosts metalv1alpha1.HostList
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := a.env.Client.List(ctx, &hosts, client.InNamespace(namespace)); err != nil {
			return false, nil
		}
		n := 0
		for i := range hosts.Items {
			if cond(&hosts.Items[i]) {
				n++
			}
		}
		return n == len(a.names), nil
	})
	if err != nil {
		var where []string
		for _, h := range hosts.Items {
			if !cond(&h) {
				c := meta.FindStatusCondition(h.Status.Conditions, metalv1alpha1.ConditionReady)
				where = append(where, fmt.Sprintf("%s: %s %s %+v", h.Name, h.Status.ProvisioningState, h.Status.LastError, c))
			}
		}
		return fmt.Errorf("%w; %s", err, strings.Join(where, "; "))
	}
	return nil
}

// waitMarkers waits until each marker is on one of the consoles.
func waitMarkers(ctx context.Context, consoles, markers []string) error {
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		var all strings.Builder
		for _, c := range consoles {
			raw, _ := os.ReadFile(c)
			all.Write(raw)
		}
		for _, m := range markers {
			if !strings.Contains(all.String(), "marker="+m+"\n") && !strings.Contains(all.String(), "marker="+m+"\r") {
				return false, nil
			}
		}
		return true, nil
	})
}
