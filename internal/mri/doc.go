// Package mri holds what every Machine Runtime Interface runtime and caller share beyond
// the generated code: the machine uid label, the conversions between a Machine's fields
// and a runtime spec's (architectures, resources, host selector, placement) that the
// poollet and a runtime making Machines of its own (the broker) both need, the checks of
// a created machine's spec that the contract asks of every runtime, which machines a list
// asks for, typed errors, and serving and dialling runtimes on unix sockets.
//
// It never holds a runtime's logic; each runtime lives under internal/runtime.
package mri
