package firstboot

import (
	"testing"
	"unicode/utf8"

	ignition "github.com/coreos/ignition/v2/config"
)

// FuzzValidateIgnition checks any bytes as an Ignition config. It never panics, it accepts
// exactly what Ignition accepts, and its refusal fits a condition: at most MaxMessage bytes
// of UTF-8 text.
func FuzzValidateIgnition(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`,
		`{"ignition":{"version":"3.4.0"}}`,
		`{"ignition":{"version":"3.0.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]}}`,
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,vm"}}]}}`,
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"relative"}]}}`,
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a","contents":{"source":"http://[::1"}}]},"systemd":{"units":[{"name":"x.service","contents":"[Unit]\n"}]}}`,
		`{"ignition":{"version":"3.5.0-experimental"}}`,
		`{"ignition":{"version":"2.2.0"}}`,
		`{"ignition":{"version":"3.4.0","config":{"merge":[{"source":"https://example.com/x"}]}},"storage":{"disks":[{"device":"/dev/vda","partitions":[{"number":1,"sizeMiB":-1}]}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ValidateIgnition(data)
		_, _, parseErr := ignition.Parse(data)
		if (err == nil) != (parseErr == nil) {
			t.Fatalf("ValidateIgnition says %v, Ignition %v", err, parseErr)
		}
		if err == nil {
			return
		}
		if msg := err.Error(); len(msg) > MaxMessage || !utf8.ValidString(msg) {
			t.Fatalf("refusal of %d bytes (UTF-8: %v): no condition can hold it", len(msg), utf8.ValidString(msg))
		}
	})
}
