// Package measure holds what the scale scenarios share: creating many objects in
// parallel, following them through an informer until enough reach a state, the slowest
// of them, a process's CPU time, the apiserver's metrics, and rates.
package measure
