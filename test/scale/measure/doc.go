// Package measure holds what the scale scenarios share: creating many objects in
// parallel, waiting on a watch until enough of them reach a state, and rates.
package measure
