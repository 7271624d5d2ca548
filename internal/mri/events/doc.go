// Package events fans a runtime's machine events out to its WatchEvents streams
// (CONTRACT.md S4): one Hub per runtime, one Subscription per stream, each starting with
// an ADDED event for every machine the runtime had when the stream began.
//
// It never decides what changed or when: the runtime publishes, under the lock that
// guards its machines. It must never block a publisher on a slow stream; a stream that
// falls behind is dropped, and its client reconnects and starts over.
package events
