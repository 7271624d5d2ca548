package mri

import "strconv"

// NewerResourceVersion reports whether resourceVersion a is later than b, for a runtime
// whose inventory is a Kubernetes API (metal, broker) and keeps the newer of an informer's
// copy and its own write. They are etcd revisions; one that does not parse is never taken
// as newer, so the incoming object wins.
func NewerResourceVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}
