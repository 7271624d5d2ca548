package main

import "github.com/spf13/pflag"

// The flags every runtime shares are spelled one way across anvil's commands: --listen is
// where a runtime serves the MRI (a poollet's --runtime names the same socket) and --pool
// the MachinePool it serves, which starts every machine id. Earlier spellings still work
// for a while, with a warning.

// addListenFlag adds --listen to f, bound to v, and deprecated as the alias old (when set).
func addListenFlag(f *pflag.FlagSet, v *string, def, old string) {
	const usage = "where to serve the MRI, unix:///path (its folder must be writable by its owner alone)"
	f.StringVar(v, "listen", def, usage)
	if old != "" {
		deprecatedAlias(f, old, "listen", v)
	}
}

// addPoolFlag adds --pool to f, bound to v, and the deprecated alias --name.
func addPoolFlag(f *pflag.FlagSet, v *string, usage string) {
	f.StringVar(v, "pool", *v, usage)
	deprecatedAlias(f, "name", "pool", v)
}

// deprecatedAlias adds flag old, writing to the same v as flag now: it is hidden from the
// help, and using it prints that now replaces it.
func deprecatedAlias(f *pflag.FlagSet, old, now string, v *string) {
	f.StringVar(v, old, *v, "deprecated: use --"+now)
	_ = f.MarkDeprecated(old, "use --"+now+" instead")
}
