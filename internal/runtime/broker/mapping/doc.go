// Package mapping is the broker runtime's pure half: how an upstream MRI machine becomes a
// downstream anvil Machine and first-boot Secret, how the downstream Machine reads back as
// an MRI machine (through the record annotation the broker keeps on it), what capacity the
// broker reports, and whether a create fits.
//
// It never talks to an API server, a registry or a clock: values in, values or a typed
// error out, so every decision is testable alone. Outside input (annotations, specs) gives
// an error, never a panic.
package mapping
