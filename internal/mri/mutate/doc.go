// Package mutate holds the changes to a machine's spec and labels that every runtime
// makes the same way for the MRI calls, with the contract's rules on them: a change
// already in place changes nothing (CONTRACT.md E3), a name attached with other settings
// is ALREADY_EXISTS, unspecified values are INVALID (E2).
//
// Its functions are pure: they never lock, persist, bump generations, touch status or
// say anything of how a runtime carries a change out. Those stay with each runtime.
package mutate
