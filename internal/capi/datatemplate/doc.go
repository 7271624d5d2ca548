// Package datatemplate renders an AnvilDataTemplate for one machine (its hostname and
// first-boot metadata, from its index, its names, a server's HardwareData and static
// address lists) and allocates the machines' indexes within a template.
//
// It is pure: the AnvilMachine controller reads the template, the machine's HardwareData
// (the tenant's own copy, never a Host) and the template's status, calls Allocate and
// Render, and writes what they return. It must never do I/O, and never executes a template
// language: the hostname pattern's three placeholders are replaced as written.
package datatemplate
