// Package claim decides which Machine holds a Volume or a NetworkInterface: at most one
// at a time, the current holder first, then the oldest claimant. It is pure: the callers
// read the objects and write the result.
package claim
