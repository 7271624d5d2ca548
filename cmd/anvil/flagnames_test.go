package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every runtime takes --listen and --pool; the earlier spellings still set the same values
// and say they are deprecated.
func TestRuntimeFlagsOneSpelling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		listen string
		pool   string
		warns  []string
	}{
		{"fake, new spellings", []string{"--listen", "unix:///a.sock", "--pool", "edge"}, "unix:///a.sock", "edge", nil},
		{"fake, old spellings", []string{"--socket", "unix:///b.sock", "--name", "edge2"}, "unix:///b.sock", "edge2", []string{"--socket", "--name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newFakeRuntimeCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			for flag, want := range map[string]string{"listen": tc.listen, "pool": tc.pool} {
				if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", flag, got, want)
				}
			}
			for _, w := range tc.warns {
				if !strings.Contains(out.String(), "Flag "+w+" has been deprecated") {
					t.Errorf("no deprecation warning for %s in %q", w, out.String())
				}
			}
		})
	}
	for _, cmd := range newRuntimeCommand().Commands() {
		for _, flag := range []string{"listen", "pool"} {
			if cmd.Flags().Lookup(flag) == nil {
				t.Errorf("anvil runtime %s has no --%s", cmd.Name(), flag)
			}
		}
	}
}
