package site

import (
	"strings"
	"testing"

	"github.com/anvil-dev/anvil/internal/ironic"
)

// A site given a running Ironic refuses the settings only a site starting Ironic uses.
func TestCheckIronic(t *testing.T) {
	running := &ironic.Ironic{}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" when valid
	}{
		{"its own Ironic, configured", Config{IronicPort: 6385, ESPImage: "/esp.img", Wipe: Wipe{Method: WipeIronic}}, ""},
		{"a running Ironic", Config{Ironic: running, MaxConcurrentDeploy: 3, Wipe: Wipe{Method: WipeNone}}, ""},
		{"a running Ironic and the eraser", Config{Ironic: running, Wipe: Wipe{Method: WipeEraser, EraserDir: "/e"}}, ""},
		{"a running Ironic and a port", Config{Ironic: running, IronicPort: 6385}, "cannot configure it"},
		{"a running Ironic and an ESP", Config{Ironic: running, ESPImage: "/esp.img"}, "cannot configure it"},
		{"a running Ironic and fake delays", Config{Ironic: running, FakeDelays: ironic.FakeDelays{Deploy: ironic.Delay{Min: 1}}}, "cannot configure it"},
		{"a running Ironic and its cleaning", Config{Ironic: running, Wipe: Wipe{Method: WipeIronic}}, "cannot configure it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.checkIronic()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("checkIronic() = %v, want %q", err, tc.want)
			}
		})
	}
}
