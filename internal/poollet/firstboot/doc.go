// Package firstboot checks a Machine's first-boot configuration before the poollet hands
// it to a runtime, so a user reads what is wrong on the Machine rather than on a guest's
// console.
//
// It is pure: it reads no Secret and never changes the data it checks. Its messages go into
// a condition, so they are bounded whatever the data holds.
package firstboot
