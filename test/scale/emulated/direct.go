package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/anvil-dev/anvil/internal/bmcemu"
)

// direct scripts the same ramdisk deployment by hand on the same Ironic, for the servers
// of a second, identical BMC emulator: what someone driving Ironic's API directly sends.
type direct struct {
	sc       *gophercloud.ServiceClient
	bmc      *bmcemu.Emulator
	specs    []bmcemu.Spec
	files    *http.Server
	filesURL string
	cmdline  string
}

// rawJSON is a request body sent as it is.
type rawJSON map[string]any

func (r rawJSON) ToNodeCreateMap() (map[string]any, error) { return r, nil }
func (r rawJSON) ToPortCreateMap() (map[string]any, error) { return r, nil }

// startDirect enrols the second emulator's servers in Ironic and takes them to available,
// before any clock starts (as anvil's Hosts are Available before its clock starts).
func startDirect(ctx context.Context, o options, state, testOS, endpoint, user, pass, microversion string) (*direct, error) {
	e, specs, password, err := newEmulator(filepath.Join(state, "direct-servers"), "direct", o.servers, o.memoryMiB, 0xd0)
	if err != nil {
		return nil, err
	}
	cmdline, err := os.ReadFile(filepath.Join(testOS, "cmdline"))
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &direct{bmc: e, specs: specs, cmdline: strings.TrimSpace(string(cmdline)),
		files:    &http.Server{Handler: http.FileServer(http.Dir(testOS)), ReadHeaderTimeout: 10 * time.Second},
		filesURL: "http://" + l.Addr().String(),
		sc: &gophercloud.ServiceClient{
			ProviderClient: &gophercloud.ProviderClient{HTTPClient: http.Client{Timeout: 30 * time.Second}},
			Endpoint:       strings.TrimRight(endpoint, "/") + "/v1/",
			Type:           "baremetal",
			Microversion:   microversion,
			MoreHeaders:    map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))},
		}}
	go func() { _ = d.files.Serve(l) }()
	errs := make(chan error, len(specs))
	for _, s := range specs {
		go func() { errs <- d.enrol(ctx, s, password) }()
	}
	for range specs {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

func (d *direct) enrol(ctx context.Context, s bmcemu.Spec, password string) error {
	addr := strings.TrimPrefix(d.bmc.Address(s.Name), "redfish+http://")
	host, system, _ := strings.Cut(addr, "/")
	body := rawJSON{"name": s.Name, "driver": "redfish",
		"driver_info": map[string]any{"redfish_address": "http://" + host, "redfish_system_id": "/" + system,
			"redfish_username": "admin", "redfish_password": password, "config_via_removable": true},
		"boot_interface": "redfish-virtual-media", "deploy_interface": "ramdisk", "inspect_interface": "no-inspect",
		"management_interface": "redfish", "power_interface": "redfish", "bios_interface": "no-bios",
		"console_interface": "no-console", "raid_interface": "no-raid", "rescue_interface": "no-rescue", "vendor_interface": "no-vendor",
		"properties": map[string]any{"cpu_arch": "x86_64"}}
	n, err := nodes.Create(ctx, d.sc, body).Extract()
	if err != nil {
		return fmt.Errorf("creating node %s: %w", s.Name, err)
	}
	if _, err := ports.Create(ctx, d.sc, rawJSON{"node_uuid": n.UUID, "address": s.MAC}).Extract(); err != nil {
		return fmt.Errorf("creating the port of node %s: %w", s.Name, err)
	}
	for _, step := range []struct {
		target nodes.TargetProvisionState
		want   string
	}{{nodes.TargetManage, "manageable"}, {nodes.TargetProvide, "available"}} {
		if err := d.provision(ctx, s.Name, step.target, nil, step.want); err != nil {
			return err
		}
	}
	return nil
}

// provision asks for target and polls (every second, as anvil's BusyPoll here) until the
// node is in want.
func (d *direct) provision(ctx context.Context, name string, target nodes.TargetProvisionState, cd any, want string) error {
	opts := nodes.ProvisionStateOpts{Target: target}
	if cd != nil {
		opts.ConfigDrive = cd
	}
	for {
		err := nodes.ChangeProvisionState(ctx, d.sc, name, opts).ExtractErr()
		if err == nil {
			break
		}
		if !gophercloud.ResponseCodeIs(err, http.StatusConflict) { // locked: try again
			return fmt.Errorf("%s node %s: %w", target, name, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	for {
		n, err := nodes.Get(ctx, d.sc, name).Extract()
		if err != nil {
			return err
		}
		switch {
		case n.ProvisionState == want && n.TargetProvisionState == "":
			return nil
		case strings.HasSuffix(n.ProvisionState, "failed") || n.ProvisionState == "error":
			return fmt.Errorf("node %s: %s: %s", name, n.ProvisionState, n.LastError)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("node %s never %s (it is %s): %w", name, want, n.ProvisionState, err)
		}
	}
}

// round deploys every server at once and returns the seconds from the first request until
// every server's console shows its marker.
func (d *direct) round(ctx context.Context, r int) (float64, error) {
	start := time.Now()
	markers := make([]string, len(d.specs))
	consoles := make([]string, len(d.specs))
	errs := make(chan error, len(d.specs))
	for i, s := range d.specs {
		markers[i], consoles[i] = fmt.Sprintf("direct-r%d-%d", r, i+1), d.bmc.ConsolePath(s.Name)
		go func() { errs <- d.deploy(ctx, s.Name, markers[i]) }()
	}
	var err error
	for range d.specs {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return 0, err
	}
	if err := waitMarkers(ctx, consoles, markers); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

func (d *direct) deploy(ctx context.Context, name, marker string) error {
	info := map[string]any{"kernel": d.filesURL + "/kernel", "ramdisk": d.filesURL + "/initramfs",
		"ramdisk_kernel_arguments": d.cmdline, "capabilities": map[string]any{"boot_mode": "bios"}}
	if _, err := nodes.Update(ctx, d.sc, name, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info", Value: info}}).Extract(); err != nil {
		return fmt.Errorf("setting the image of node %s: %w", name, err)
	}
	cd := map[string]any{"user_data": "#cloud-config\n# anvil-marker=" + marker + "\n",
		"meta_data": map[string]any{"uuid": name, "hostname": name}}
	return d.provision(ctx, name, nodes.TargetActive, cd, "active")
}

// cleanup undeploys every server.
func (d *direct) cleanup(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(d.specs))
	for i, s := range d.specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.provision(ctx, s.Name, nodes.TargetDeleted, nil, "available")
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (d *direct) stop() {
	_ = d.files.Close()
	stopEmulator(d.bmc)
}

// watchDeploying counts, every half second, the nodes Ironic is deploying; the function
// it returns stops the watch and returns the most seen at once.
func watchDeploying(ctx context.Context, sc *gophercloud.ServiceClient) func() int {
	ctx, cancel := context.WithCancel(ctx)
	peak := make(chan int, 1)
	go func() {
		most := 0
		for sleep(ctx, 500*time.Millisecond) == nil {
			var list struct {
				Nodes []struct {
					ProvisionState string `json:"provision_state"`
				} `json:"nodes"`
			}
			if _, err := sc.Get(ctx, sc.ServiceURL("nodes")+"?fields=provision_state", &list, nil); err != nil {
				continue
			}
			n := 0
			for _, node := range list.Nodes {
				if node.ProvisionState == "deploying" || node.ProvisionState == "wait call-back" {
					n++
				}
			}
			most = max(most, n)
		}
		peak <- most
	}()
	return func() int {
		cancel()
		return <-peak
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
