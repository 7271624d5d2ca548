// Package watchstats counts, per process, how its informers' watches end and how often an
// informer lists again, so a cut or expired watch is a number on /metrics rather than a
// guess. It wraps the ListerWatcher client-go's reflector drives (controller-runtime's
// cache.Options.NewInformer), and changes nothing of what the reflector does: a watch the
// apiserver closes is resumed from its last resource version, one that expired (410 Gone,
// "too old resource version") is relisted, by client-go itself.
//
// It must never hold back, reorder or drop an event: it only looks at them as they pass.
package watchstats
