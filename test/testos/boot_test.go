package testos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	"github.com/anvil-dev/anvil/internal/nocloud"
)

// ignitionConfig is an Ignition v3 config naming the hostname in /etc/hostname and holding
// the marker in another file, as a Machine's user data would.
func ignitionConfig(t *testing.T, hostname, marker string) string {
	t.Helper()
	file := func(path, data string) map[string]any {
		return map[string]any{"path": path, "mode": 420, "overwrite": true,
			"contents": map[string]any{"source": "data:," + data}}
	}
	config, err := json.MarshalIndent(map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{
			file("/etc/anvil/marker", "anvil-marker="+marker),
			file("/etc/hostname", hostname+"%0A"),
		}},
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(path, config, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func seed(t *testing.T, userData, metaData string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := nocloud.WriteISO(path, nocloud.Seed{UserData: []byte(userData), MetaData: []byte(metaData)}); err != nil {
		t.Fatal(err)
	}
	return path
}

// Each architecture boots with each config source, prints exactly its own marker line, and
// powers off when QEMU presses the power button.
func TestBoot(t *testing.T) {
	cases := []struct {
		name     string
		arch     computev1alpha1.Architecture
		hostname string
		marker   string
		source   func(t *testing.T) []string
	}{{
		name: "amd64/ignition", arch: computev1alpha1.ArchitectureAMD64,
		hostname: "ign-amd", marker: "amd64.ign_1-a",
		source: func(t *testing.T) []string {
			return []string{"-fw_cfg", "name=opt/com.coreos/config,file=" + ignitionConfig(t, "ign-amd", "amd64.ign_1-a")}
		},
	}, {
		name: "arm64/ignition", arch: computev1alpha1.ArchitectureARM64,
		hostname: "ign-arm", marker: "arm64.ign_2-b",
		source: func(t *testing.T) []string {
			return []string{"-fw_cfg", "name=opt/com.coreos/config,file=" + ignitionConfig(t, "ign-arm", "arm64.ign_2-b")}
		},
	}, {
		// meta-data's local-hostname when user-data names none.
		name: "amd64/nocloud", arch: computev1alpha1.ArchitectureAMD64,
		hostname: "ci-amd", marker: "amd64-ci-3",
		source: func(t *testing.T) []string {
			iso := seed(t, "#cloud-config\nruncmd:\n- echo anvil-marker=amd64-ci-3\n",
				"instance-id: i-amd\nlocal-hostname: ci-amd\n")
			return seedDrive(iso)
		},
	}, {
		// user-data's hostname wins over meta-data's, as in cloud-init.
		name: "arm64/nocloud", arch: computev1alpha1.ArchitectureARM64,
		hostname: "ci-arm", marker: "arm64-ci-4",
		source: func(t *testing.T) []string {
			iso := seed(t, "#cloud-config\nhostname: ci-arm\nruncmd:\n- echo anvil-marker=arm64-ci-4\n",
				"instance-id: i-arm\nlocal-hostname: not-this-one\n")
			return seedDrive(iso)
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := boot(t, c.arch, c.arch, c.source(t)...)
			want := ReadyLine(c.arch, c.hostname, c.marker)
			line, after := v.waitForLine(t, "ANVIL-TESTOS-READY", markerDeadline)
			if line != want {
				t.Fatalf("marker line = %q, want %q", line, want)
			}
			took := v.powerOff(t)
			if n := len(v.lines("ANVIL-TESTOS-READY")); n != 1 {
				t.Errorf("%d marker lines on the console, want 1:\n%s", n, v.console())
			}
			if !strings.Contains(v.console(), "reboot: Power down") {
				t.Errorf("QEMU exited without the guest powering down:\n%s", v.console())
			}
			t.Logf("%s: marker %.1fs after QEMU started; clean power-off %.1fs after system_powerdown",
				c.name, after.Seconds(), took.Seconds())
		})
	}
}

func seedDrive(iso string) []string {
	return []string{
		"-drive", "file=" + iso + ",if=none,id=seed,format=raw,readonly=on",
		"-device", "virtio-blk-pci,drive=seed",
	}
}

// Without any config the guest still comes up, with the default hostname and no marker.
func TestBootWithoutConfig(t *testing.T) {
	v := boot(t, computev1alpha1.ArchitectureARM64, computev1alpha1.ArchitectureARM64)
	line, _ := v.waitForLine(t, "ANVIL-TESTOS-READY", markerDeadline)
	if want := ReadyLine(computev1alpha1.ArchitectureARM64, "testos", "none"); line != want {
		t.Fatalf("marker line = %q, want %q", line, want)
	}
	v.powerOff(t)
}

// An arm64 initramfs under an x86_64 kernel never reaches the marker: the wrong
// architecture really fails, so a runtime that mixes them up cannot pass by accident.
func TestWrongArchitectureFails(t *testing.T) {
	v := boot(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64)
	v.waitForLine(t, "Kernel panic", markerDeadline)
	if !strings.Contains(v.console(), "Failed to execute /init (error -8)") {
		t.Errorf("the kernel did not refuse /init as a foreign executable:\n%s", v.console())
	}
	if lines := v.lines("ANVIL-TESTOS-READY"); len(lines) > 0 {
		t.Errorf("the wrong architecture printed a marker: %q", lines)
	}
}

// A user data that is a script runs once, as cloud-init runs one, between the two lines
// the attack tests read a guest's findings from; its exit status is on the last.
func TestUserDataScriptRuns(t *testing.T) {
	iso := seed(t, "#!/bin/sh\n# anvil-marker=script-5\necho found-$((6*7))\nexit 3\n", "instance-id: i-script\n")
	v := boot(t, computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureAMD64, seedDrive(iso)...)
	line, _ := v.waitForLine(t, "ANVIL-TESTOS-READY", markerDeadline)
	if want := ReadyLine(computev1alpha1.ArchitectureAMD64, "testos", "script-5"); line != want {
		t.Fatalf("marker line = %q, want %q", line, want)
	}
	end, _ := v.waitForLine(t, "ANVIL-TESTOS-SCRIPT-END", markerDeadline)
	if end != "ANVIL-TESTOS-SCRIPT-END rc=3" {
		t.Errorf("end line = %q, want rc=3", end)
	}
	console := v.console()
	begin := strings.Index(console, "ANVIL-TESTOS-SCRIPT-BEGIN")
	if begin < 0 || !strings.Contains(console[begin:], "\nfound-42") {
		t.Errorf("the script's output is not between its lines:\n%s", console)
	}
	v.powerOff(t)
}
