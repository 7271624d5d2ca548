// Package qmp is a client of QEMU's machine protocol (QMP): JSON objects over a unix
// socket, a greeting, capability negotiation, commands matched to replies by id, and
// asynchronous events interleaved with the replies.
//
// It knows nothing of machines or runtimes; it must never start or kill a QEMU process.
package qmp
