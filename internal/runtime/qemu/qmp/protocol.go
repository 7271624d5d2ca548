package qmp

import (
	"encoding/json"
	"fmt"
	"time"
)

// greeting is the first object QEMU sends on a new connection.
type greeting struct {
	QMP *struct {
		Version struct {
			QEMU struct {
				Major int `json:"major"`
				Minor int `json:"minor"`
				Micro int `json:"micro"`
			} `json:"qemu"`
			Package string `json:"package"`
		} `json:"version"`
		Capabilities []string `json:"capabilities"`
	} `json:"QMP"`
}

// command is what the client sends.
type command struct {
	Execute   string `json:"execute"`
	Arguments any    `json:"arguments,omitempty"`
	ID        uint64 `json:"id"`
}

// message is anything QEMU sends after the greeting: a reply (return or error, with the
// command's id) or an event.
type message struct {
	ID        *uint64         `json:"id,omitempty"`
	Return    json.RawMessage `json:"return,omitempty"`
	Error     *Error          `json:"error,omitempty"`
	Event     string          `json:"event,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Timestamp *struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp,omitempty"`
}

// Error is an error reply from QEMU.
type Error struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *Error) Error() string { return fmt.Sprintf("qmp: %s: %s", e.Class, e.Desc) }

// Event is an asynchronous notification, such as SHUTDOWN, RESET, STOP, POWERDOWN or
// DEVICE_DELETED.
type Event struct {
	Name string
	Data json.RawMessage
	Time time.Time
}

// Version is the QEMU version from the greeting.
type Version struct {
	Major, Minor, Micro int
	Package             string
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro) }

// Status is the reply of query-status.
type Status struct {
	Running bool   `json:"running"`
	Status  string `json:"status"`
}
