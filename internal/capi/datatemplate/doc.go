// Package datatemplate renders an AnvilDataTemplate for one machine (its hostname and
// first-boot metadata, from its index, its names and static address lists, plus the
// references to hardware values that the runtime placing the machine resolves) and
// allocates the machines' indexes within a template.
//
// It is pure: the AnvilMachine controller reads the template and its status, calls
// Allocate and Render, and writes what they return. It must never do I/O, never read a
// server's hardware (the runtime that claims the server resolves the references into its
// first boot), and never executes a template language: the hostname pattern's three
// placeholders are replaced as written.
package datatemplate
