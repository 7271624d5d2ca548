package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/anvil-dev/anvil/test/diskimage"
)

// direct scripts the minimal Ironic API sequence for a host, one goroutine per node: what
// anyone driving Ironic by hand, with the same poll interval as anvil, would send.
type direct struct {
	sc   *gophercloud.ServiceClient
	poll time.Duration
	disk *diskimage.Server
	// verify fetches the disk and checks its sha256 once per run: anvil verifies an image
	// before its first deployment and remembers it, so the direct path does the same work.
	verify func() error
	// powerOn makes the direct path power nodes on after deployment, as anvil does for an
	// online Host (see ensureOn).
	powerOn bool
}

func newDirect(endpoint, user, pass, microversion string, poll time.Duration, d *diskimage.Server) *direct {
	base := strings.TrimRight(endpoint, "/") + "/"
	return &direct{
		// The same client anvil's provisioner builds: a plain http.Client (its default
		// transport), basic auth, the microversion it negotiated.
		sc: &gophercloud.ServiceClient{
			ProviderClient: &gophercloud.ProviderClient{HTTPClient: http.Client{Timeout: 30 * time.Second}},
			Endpoint:       base + "v1/",
			Type:           "baremetal",
			Microversion:   microversion,
			MoreHeaders:    map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))},
		},
		poll:   poll,
		disk:   d,
		verify: sync.OnceValue(func() error { return fetchAndCheck(d) }),
	}
}

func fetchAndCheck(d *diskimage.Server) error {
	resp, err := http.Get(d.URL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.SHA256 {
		return fmt.Errorf("the disk has sha256 %s, want %s", got, d.SHA256)
	}
	return nil
}

const directPrefix = "direct-"

// run takes n new nodes from creation to active, all at once, and returns the seconds from
// the first create to the last node active.
func (d *direct) run(ctx context.Context, round, n int) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	ph := newPhases(start, "manageable", "inspected", "available", "active")
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%sr%d-%d", directPrefix, round, i)
		mac := fmt.Sprintf("52:54:01:%02x:%02x:%02x", round&0xff, (i>>8)&0xff, i&0xff)
		go func() { errs <- d.deploy(ctx, name, mac, ph) }()
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return result{seconds: time.Since(start).Seconds(), phases: ph.String()}, first
}

// rawJSON is a request body sent as it is.
type rawJSON map[string]any

func (r rawJSON) ToNodeCreateMap() (map[string]any, error) { return r, nil }
func (r rawJSON) ToPortCreateMap() (map[string]any, error) { return r, nil }

// deploy is one node's whole sequence.
func (d *direct) deploy(ctx context.Context, name, mac string, ph *phases) error {
	// The driver, interfaces and properties anvil registers a fake:// Host with
	// (internal/provisioner/ironic/registration.go).
	body := rawJSON{"name": name, "driver": "fake-hardware", "driver_info": map[string]any{},
		"properties": map[string]any{"cpu_arch": "x86_64", "cpus": 8, "memory_mb": 16384, "local_gb": 100}}
	for _, k := range []string{"bios", "boot", "console", "deploy", "inspect", "management", "power", "raid", "rescue", "vendor"} {
		body[k+"_interface"] = "fake"
	}
	var node *nodes.Node
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		node, err = nodes.Create(ctx, d.sc, body).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			// Created by a first attempt whose answer was lost (timed out): read it.
			node, err = nodes.Get(ctx, d.sc, name).Extract()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	port := rawJSON{"node_uuid": node.UUID, "address": mac, "extra": map[string]any{"anvil": "boot-mac"}}
	err = retry(ctx, func(ctx context.Context) error {
		err := ports.Create(ctx, d.sc, port).Err
		if gophercloud.ResponseCodeIs(err, http.StatusConflict) && strings.Contains(errorBody(err), "already exists") {
			return nil // created by a first attempt whose answer was lost
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating the port of node %s: %w", name, err)
	}
	if err := d.change(ctx, name, nodes.TargetManage, nil, "manageable", nil); err != nil {
		return err
	}
	ph.reached("manageable", name)
	inspected := func(n *nodes.Node) bool { return n.InspectionFinishedAt != nil }
	if err := d.change(ctx, name, nodes.TargetInspect, nil, "manageable", inspected); err != nil {
		return err
	}
	ph.reached("inspected", name)
	if err := d.change(ctx, name, nodes.TargetProvide, nil, "available", nil); err != nil {
		return err
	}
	ph.reached("available", name)
	if err := d.verify(); err != nil {
		return err
	}
	// What anvil's provisioner writes (internal/provisioner/ironic/image.go).
	info := map[string]any{"image_source": d.disk.URL, "image_os_hash_algo": "sha256",
		"image_os_hash_value": d.disk.SHA256, "image_disk_format": "raw"}
	err = retry(ctx, func(ctx context.Context) error {
		ops := nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info", Value: info}}
		return nodes.Update(ctx, d.sc, name, ops).Err
	})
	if err != nil {
		return fmt.Errorf("setting the image of node %s: %w", name, err)
	}
	cd := map[string]any{"meta_data": map[string]any{"uuid": name, "hostname": name}, "user_data": userData(name)}
	if err := d.change(ctx, name, nodes.TargetActive, cd, "active", nil); err != nil {
		return err
	}
	if d.powerOn {
		if err := d.ensureOn(ctx, name); err != nil {
			return err
		}
	}
	ph.reached("active", name)
	return nil
}

// ensureOn does what anvil does for a Host that is to be online: a server Ironic does not
// report powered on after its deployment is powered on, and read until it is. Real
// hardware ends a deployment powered on; Ironic's fake hardware leaves the power state
// unset, so with fake hardware both paths pay one power request and one more read.
func (d *direct) ensureOn(ctx context.Context, name string) error {
	var n *nodes.Node
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		n, err = nodes.Get(ctx, d.sc, name).Extract()
		return err
	})
	if err != nil || n.PowerState == string(nodes.PowerOn) {
		return err
	}
	err = retry(ctx, func(ctx context.Context) error {
		return nodes.ChangePowerState(ctx, d.sc, name, nodes.PowerStateOpts{Target: nodes.PowerOn}).ExtractErr()
	})
	if err != nil {
		return fmt.Errorf("powering node %s on: %w", name, err)
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for node %s to be on: %w", name, ctx.Err())
		case <-time.After(d.poll):
		}
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			n, err = nodes.Get(ctx, d.sc, name).Extract()
			return err
		})
		if err != nil {
			return fmt.Errorf("reading node %s: %w", name, err)
		}
		if n.PowerState == string(nodes.PowerOn) && n.TargetPowerState == "" {
			return nil
		}
	}
}

// change asks for a provision state change, then reads the node every poll until it is
// stably in want (and done holds).
func (d *direct) change(ctx context.Context, name string, target nodes.TargetProvisionState, cd map[string]any, want string, done func(*nodes.Node) bool) error {
	opts := nodes.ProvisionStateOpts{Target: target}
	if cd != nil {
		opts.ConfigDrive = cd
	}
	tries := 0
	err := retry(ctx, func(ctx context.Context) error {
		tries++
		err := nodes.ChangeProvisionState(ctx, d.sc, name, opts).ExtractErr()
		if tries > 1 && gophercloud.ResponseCodeIs(err, http.StatusBadRequest) && strings.Contains(errorBody(err), "can not be performed") {
			return nil // an earlier attempt whose answer was lost (timed out) did it
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s node %s: %w", target, name, err)
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for node %s to be %s: %w", name, want, ctx.Err())
		case <-time.After(d.poll):
		}
		var n *nodes.Node
		// The whole node, as `baremetal node show` and anvil's provisioner read it.
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			n, err = nodes.Get(ctx, d.sc, name).Extract()
			return err
		})
		if err != nil {
			return fmt.Errorf("reading node %s: %w", name, err)
		}
		st := n.ProvisionState
		if strings.HasSuffix(st, "failed") || st == "error" || (st == "enroll" && n.TargetProvisionState == "" && n.LastError != "") {
			return fmt.Errorf("node %s is %q after %s: %s", name, st, target, n.LastError)
		}
		if st == want && n.TargetProvisionState == "" && (done == nil || done(n)) {
			return nil
		}
	}
}

// retry repeats f while Ironic says the node is locked (409) or it is busy (503), and on
// the other failures anvil's provisioner retries (internal/provisioner/ironic errors.go
// temporary: 502, 504, SQLite's "database is locked", timeouts, refused or reset
// connections), after a short back-off, as long as ctx lasts.
func retry(ctx context.Context, f func(context.Context) error) error {
	delay := 100 * time.Millisecond
	for {
		err := f(ctx)
		if err == nil || !temporary(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay/2 + rand.N(delay)):
		}
		delay = min(2*delay, time.Second)
	}
}

func temporary(err error) bool {
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		switch ue.Actual {
		case http.StatusConflict, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
			return true
		case http.StatusInternalServerError:
			return strings.Contains(string(ue.Body), "database is locked")
		}
		return false
	}
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &ne) && ne.Timeout())
}

func errorBody(err error) string {
	var ue gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &ue) {
		return string(ue.Body)
	}
	return ""
}

// listNodes returns the names of Ironic's nodes.
func (d *direct) listNodes(ctx context.Context) ([]string, error) {
	var page struct {
		Nodes []struct {
			Name string `json:"name"`
		} `json:"nodes"`
	}
	_, err := d.sc.Get(ctx, d.sc.ServiceURL("nodes")+"?fields=name&limit=1000", &page, &gophercloud.RequestOpts{OkCodes: []int{200}})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range page.Nodes {
		names = append(names, n.Name)
	}
	return names, nil
}

// cleanup removes the direct path's nodes: maintenance on (Ironic then deletes an active
// node without touching it), then delete.
func (d *direct) cleanup(ctx context.Context) error {
	names, err := d.listNodes(ctx)
	if err != nil {
		return err
	}
	errs := make(chan error, len(names))
	n := 0
	for _, name := range names {
		if !strings.HasPrefix(name, directPrefix) {
			continue
		}
		n++
		go func() {
			err := retry(ctx, func(ctx context.Context) error {
				return nodes.SetMaintenance(ctx, d.sc, name, nodes.MaintenanceOpts{Reason: "benchmark cleanup"}).ExtractErr()
			})
			if err == nil {
				err = retry(ctx, func(ctx context.Context) error { return nodes.Delete(ctx, d.sc, name).ExtractErr() })
			}
			errs <- err
		}()
	}
	var all []error
	for i := 0; i < n; i++ {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// waitEmpty waits until Ironic has no nodes, so each path starts from the same Ironic.
func (d *direct) waitEmpty(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		names, err := d.listNodes(ctx)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Ironic still has %d nodes after %s", len(names), timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// userData is the same first-boot data on both paths.
func userData(name string) string { return "#cloud-config\nhostname: " + name + "\n" }
