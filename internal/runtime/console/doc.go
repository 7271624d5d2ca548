// Package console serves the MRI's console calls (ReadConsoleLog, AttachConsole;
// api/mri/v1alpha1/CONTRACT.md C1-C7) for any runtime that can give a machine's console as
// an append-only log and, for a writer, a stream into its serial port: how a log is tailed
// and followed, the one-writer rule, and what an attach stream may carry. Each runtime says
// only where a machine's log is and how to open its input (docs/console.md).
//
// Memory stays bounded whatever a guest writes: every reader reads the log at its own
// pace through one fixed buffer, so output a caller has not taken waits in the log, never
// in the runtime.
package console
