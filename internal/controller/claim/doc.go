// Package claim holds the controllers that decide who holds each Volume and each
// NetworkInterface: one controller per kind, sharing one implementation. The decision
// is internal/claim's; these controllers read the referencing Machines through a field
// index and write status.claimRef and the Claimed condition in one patch.
//
// Only these controllers write a claimRef, and one key is never reconciled twice at once,
// so two Machines can never both hold one object.
package claim
