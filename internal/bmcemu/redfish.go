package bmcemu

import (
	"context"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
)

// The Redfish resources the emulator serves: what sushy (Ironic's Redfish library) reads to
// power, boot, insert virtual media and inspect.
const root = "/redfish/v1"

var (
	overrideTargets = []string{targetNone, "Pxe", targetCd, targetHdd}
	overrideModes   = []string{"Disabled", "Once", "Continuous"}
	resetTypes      = []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle"}
)

func (e *Emulator) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Ironic saw a kept-alive connection dropped mid-undeploy (RemoteDisconnected):
		// one request per connection, as small BMCs do.
		w.Header().Set("Connection", "close")
		w.Header().Set("OData-Version", "4.0")
		path := strings.TrimRight(r.URL.Path, "/")
		if path == root { // the service root is readable without credentials
			reply(w, e.serviceRoot())
			return
		}
		if !e.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="bmcemu"`)
			fail(w, http.StatusUnauthorized, "invalid credentials")
			return
		}
		e.route(w, r, strings.Split(strings.TrimPrefix(path, root+"/"), "/"))
	})
}

func (e *Emulator) authorized(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(u), []byte(e.cfg.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(p), []byte(e.cfg.Password)) == 1
}

// route serves the path's segments below /redfish/v1.
func (e *Emulator) route(w http.ResponseWriter, r *http.Request, seg []string) {
	get := r.Method == http.MethodGet
	switch {
	case get && len(seg) == 1 && seg[0] == "Systems":
		reply(w, e.collection("Systems", "Systems"))
		return
	case get && len(seg) == 1 && seg[0] == "Managers":
		reply(w, e.collection("Managers", "Managers"))
		return
	case len(seg) < 2 || (seg[0] != "Systems" && seg[0] != "Managers"):
		fail(w, http.StatusNotFound, "no such resource")
		return
	}
	m := e.machines[seg[1]]
	if m == nil {
		fail(w, http.StatusNotFound, "no such server")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if seg[0] == "Systems" {
		e.system(w, r, m, seg[2:])
	} else {
		e.manager(w, r, m, seg[2:])
	}
}

func (e *Emulator) system(w http.ResponseWriter, r *http.Request, m *machine, seg []string) {
	base := root + "/Systems/" + m.spec.Name
	get := r.Method == http.MethodGet
	switch {
	case len(seg) == 0 && get:
		reply(w, systemResource(m, base))
	case len(seg) == 0 && r.Method == http.MethodPatch:
		var body struct{ Boot map[string]string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			fail(w, http.StatusBadRequest, "the body is not JSON: "+err.Error())
			return
		}
		target, enabled, err := m.patchedOverride(body.Boot)
		if err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := m.setOverride(target, enabled); err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case len(seg) == 2 && seg[0] == "Actions" && seg[1] == "ComputerSystem.Reset" && r.Method == http.MethodPost:
		var body struct{ ResetType string }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !slices.Contains(resetTypes, body.ResetType) {
			fail(w, http.StatusBadRequest, "ResetType must be one of "+strings.Join(resetTypes, ", "))
			return
		}
		if err := m.reset(r.Context(), body.ResetType); err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case get && len(seg) == 1 && seg[0] == "Processors":
		reply(w, members(base+"/Processors", "Processors", base+"/Processors/1"))
	case get && len(seg) == 2 && seg[0] == "Processors" && seg[1] == "1":
		arch, set := "x86", "x86-64"
		if m.spec.arch() == computev1alpha1.ArchitectureARM64 {
			arch, set = "ARM", "ARM-A64"
		}
		reply(w, map[string]any{"@odata.id": base + "/Processors/1", "@odata.type": "#Processor.v1_3_0.Processor",
			"Id": "1", "Name": "CPU", "ProcessorType": "CPU", "ProcessorArchitecture": arch, "InstructionSet": set,
			"TotalCores": m.spec.CPUs, "TotalThreads": m.spec.CPUs, "Status": enabled()})
	case get && len(seg) == 1 && seg[0] == "EthernetInterfaces":
		reply(w, members(base+"/EthernetInterfaces", "Ethernet Interfaces", base+"/EthernetInterfaces/1"))
	case get && len(seg) == 2 && seg[0] == "EthernetInterfaces" && seg[1] == "1":
		reply(w, map[string]any{"@odata.id": base + "/EthernetInterfaces/1", "@odata.type": "#EthernetInterface.v1_4_0.EthernetInterface",
			"Id": "1", "Name": "NIC", "MACAddress": m.spec.MAC, "PermanentMACAddress": m.spec.MAC,
			"LinkStatus": "LinkUp", "Status": enabled()})
	case get && len(seg) == 1 && seg[0] == "SimpleStorage":
		reply(w, members(base+"/SimpleStorage", "Simple Storage", base+"/SimpleStorage/1"))
	case get && len(seg) == 2 && seg[0] == "SimpleStorage" && seg[1] == "1":
		reply(w, map[string]any{"@odata.id": base + "/SimpleStorage/1", "@odata.type": "#SimpleStorage.v1_2_0.SimpleStorage",
			"Id": "1", "Name": "Disk controller", "Status": enabled(),
			"Devices": disks(m.spec)})
	default:
		fail(w, http.StatusNotFound, "no such resource")
	}
}

func (e *Emulator) manager(w http.ResponseWriter, r *http.Request, m *machine, seg []string) {
	base := root + "/Managers/" + m.spec.Name
	get := r.Method == http.MethodGet
	switch {
	case len(seg) == 0 && get:
		reply(w, map[string]any{"@odata.id": base, "@odata.type": "#Manager.v1_5_0.Manager", "Id": m.spec.Name,
			"Name": "BMC of " + m.spec.Name, "ManagerType": "BMC", "Status": enabled(),
			"VirtualMedia": link(base + "/VirtualMedia"),
			"Links":        map[string]any{"ManagerForServers": []any{link(root + "/Systems/" + m.spec.Name)}}})
	case len(seg) == 1 && seg[0] == "VirtualMedia" && get:
		reply(w, members(base+"/VirtualMedia", "Virtual Media", base+"/VirtualMedia/"+slotCd, base+"/VirtualMedia/"+slotUSB))
	case len(seg) >= 2 && seg[0] == "VirtualMedia" && (seg[1] == slotCd || seg[1] == slotUSB):
		slot, at := seg[1], base+"/VirtualMedia/"+seg[1]
		switch {
		case len(seg) == 2 && get:
			reply(w, mediaResource(m, slot, at))
		case len(seg) == 4 && seg[2] == "Actions" && seg[3] == "VirtualMedia.InsertMedia" && r.Method == http.MethodPost:
			var body struct{ Image string }
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Image == "" {
				fail(w, http.StatusBadRequest, "InsertMedia needs the Image URL")
				return
			}
			if err := m.insert(r.Context(), slot, body.Image); err != nil {
				status := http.StatusInternalServerError
				if errors.Is(err, errInserted) {
					status = http.StatusConflict
				}
				fail(w, status, err.Error())
				return
			}
			w.WriteHeader(http.StatusNoContent)
		case len(seg) == 4 && seg[2] == "Actions" && seg[3] == "VirtualMedia.EjectMedia" && r.Method == http.MethodPost:
			if err := m.eject(r.Context(), slot); err != nil {
				fail(w, http.StatusInternalServerError, err.Error())
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			fail(w, http.StatusNotFound, "no such resource")
		}
	default:
		fail(w, http.StatusNotFound, "no such resource")
	}
}

// patchedOverride is the boot source override after a PATCH of the system's Boot; fields
// left out keep their value.
func (m *machine) patchedOverride(boot map[string]string) (target, enabled string, err error) {
	target, enabled = m.override, m.overrideEnabled
	if v, ok := boot["BootSourceOverrideTarget"]; ok {
		if !slices.Contains(overrideTargets, v) {
			return "", "", fmt.Errorf("BootSourceOverrideTarget %q: use one of %s", v, strings.Join(overrideTargets, ", "))
		}
		target = v
	}
	if v, ok := boot["BootSourceOverrideEnabled"]; ok {
		if !slices.Contains(overrideModes, v) {
			return "", "", fmt.Errorf("BootSourceOverrideEnabled %q: use one of %s", v, strings.Join(overrideModes, ", "))
		}
		enabled = v
	}
	if v, ok := boot["BootSourceOverrideMode"]; ok && v != m.spec.BootMode() {
		return "", "", fmt.Errorf("BootSourceOverrideMode %q: this %s server boots %s only", v, m.spec.arch(), m.spec.BootMode())
	}
	return target, enabled, nil
}

// setOverride sets the boot source override, kept across the emulator's restarts.
func (m *machine) setOverride(target, enabled string) error {
	was, wasEnabled := m.override, m.overrideEnabled
	m.override, m.overrideEnabled = target, enabled
	if err := m.save(); err != nil {
		m.override, m.overrideEnabled = was, wasEnabled
		return err
	}
	return nil
}

// reset carries out a ComputerSystem.Reset. Restarts of a server that is off start it.
func (m *machine) reset(ctx context.Context, resetType string) error {
	switch resetType {
	case "On":
		return m.powerOn(ctx)
	case "ForceOff":
		return m.powerOff(ctx, true)
	case "GracefulShutdown":
		return m.powerOff(ctx, false)
	}
	return m.restart(ctx)
}

func (e *Emulator) serviceRoot() map[string]any {
	return map[string]any{"@odata.id": root + "/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
		"Id": "RootService", "Name": "anvil emulated BMC", "RedfishVersion": "1.6.0", "UUID": uuidOf("bmc"),
		"Systems": link(root + "/Systems"), "Managers": link(root + "/Managers")}
}

func (e *Emulator) collection(kind, name string) map[string]any {
	ids := make([]string, len(e.names))
	for i, n := range e.names {
		ids[i] = root + "/" + kind + "/" + n
	}
	return members(root+"/"+kind, name, ids...)
}

func systemResource(m *machine, base string) map[string]any {
	power := "Off"
	if m.on() {
		power = "On"
	}
	// The serial console (ComputerSystem v1_13's SerialConsole): one raw session at a time
	// on the Telnet service's port, at the BMC's own host.
	serial := map[string]any{"MaxConcurrentSessions": 1,
		"IPMI": map[string]any{"ServiceEnabled": false}, "SSH": map[string]any{"ServiceEnabled": false},
		"Telnet": map[string]any{"ServiceEnabled": m.serial != nil}}
	if m.serial != nil {
		serial["Telnet"].(map[string]any)["Port"] = m.serial.Port()
	}
	return map[string]any{"@odata.id": base, "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
		"SerialConsole": serial,
		"Id":            m.spec.Name, "Name": m.spec.Name, "UUID": uuidOf(m.spec.Name), "PowerState": power,
		"Status": enabled(), "SystemType": "Physical", "Manufacturer": "anvil", "Model": "emulated server (QEMU)",
		"Boot": map[string]any{
			"BootSourceOverrideEnabled": m.overrideEnabled, "BootSourceOverrideTarget": m.override,
			"BootSourceOverrideTarget@Redfish.AllowableValues": overrideTargets, "BootSourceOverrideMode": m.spec.BootMode()},
		"ProcessorSummary":   map[string]any{"Count": m.spec.CPUs, "Status": enabled()},
		"MemorySummary":      map[string]any{"TotalSystemMemoryGiB": float64(m.spec.MemoryMiB) / 1024, "Status": enabled()},
		"Processors":         link(base + "/Processors"),
		"EthernetInterfaces": link(base + "/EthernetInterfaces"),
		"SimpleStorage":      link(base + "/SimpleStorage"),
		"Links":              map[string]any{"ManagedBy": []any{link(root + "/Managers/" + m.spec.Name)}},
		"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
			"target": base + "/Actions/ComputerSystem.Reset", "ResetType@Redfish.AllowableValues": resetTypes}},
	}
}

func mediaResource(m *machine, slot, at string) map[string]any {
	types := []string{"CD", "DVD"}
	if slot == slotUSB {
		types = []string{"USBStick"}
	}
	image := m.media[slot]
	return map[string]any{"@odata.id": at, "@odata.type": "#VirtualMedia.v1_3_0.VirtualMedia", "Id": slot, "Name": slot,
		"MediaTypes": types, "Image": image, "Inserted": image != "", "WriteProtected": true, "ConnectedVia": "URI",
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": at + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": at + "/Actions/VirtualMedia.EjectMedia"}}}
}

func members(id, name string, ids ...string) map[string]any {
	list := make([]any, len(ids))
	for i, m := range ids {
		list[i] = link(m)
	}
	return map[string]any{"@odata.id": id, "Name": name, "Members@odata.count": len(ids), "Members": list}
}

func link(id string) map[string]any { return map[string]any{"@odata.id": id} }
func enabled() map[string]any       { return map[string]any{"State": "Enabled", "Health": "OK"} }

// uuidOf is a stable UUID for name, so a server keeps its identity across restarts.
func uuidOf(name string) string {
	h := sha1.Sum([]byte("anvil-bmcemu:" + name))
	h[6] = h[6]&0x0f | 0x50 // version 5
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": "Base.1.0.GeneralError", "message": msg,
		"@Message.ExtendedInfo": []any{map[string]any{"Message": msg, "MessageId": "Base.1.0.GeneralError"}}}})
}

// disks are the server's disks as SimpleStorage lists them: its disk, and its data disk.
func disks(s Spec) []any {
	d := []any{map[string]any{"Name": "disk", "CapacityBytes": s.DiskGiB << 30, "Status": enabled()}}
	if s.DataDiskMiB > 0 {
		d = append(d, map[string]any{"Name": "data", "CapacityBytes": s.DataDiskMiB << 20, "Status": enabled()})
	}
	return d
}
