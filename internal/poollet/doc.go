// Package poollet is the agent of one MachinePool: it keeps the pool's status and
// heartbeat Lease current from its runtime, and turns the Machines bound to the pool into
// Machine Runtime Interface calls, writing back what the runtime reports.
//
// It reads only its own pool's Machines (a field selector on spec.machinePoolRef.name),
// resolves first-boot Secrets and image digests itself so the runtime never reads the
// Kubernetes API, and never decides placement: a runtime's refusal goes back to the
// scheduler through the Scheduled condition.
package poollet
