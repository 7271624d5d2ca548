package kubedev

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Writer is who made API writes, as the audit log (Dev.AuditLog) says: the client program
// (its user agent's first word: capi-manager, anvil, kubectl, ...) and the user it acted as
// (an impersonated user when it impersonated one, as anvil's Cluster API provider does).
type Writer struct{ Program, User string }

func (w Writer) String() string { return w.Program + " as " + w.User }

// auditEvent is what AuditWrites reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Verb             string                     `json:"verb"`
	UserAgent        string                     `json:"userAgent"`
	User             struct{ Username string }  `json:"user"`
	ImpersonatedUser *struct{ Username string } `json:"impersonatedUser"`
	ResponseStatus   *struct{ Code int }        `json:"responseStatus"`
}

// CountWrites counts the successful writes (create, update, patch, delete) of each Writer in
// an audit log of JSON lines (kube-apiserver's --audit-log-format=json).
func CountWrites(log io.Reader) (map[Writer]int, error) {
	counts := map[Writer]int{}
	s := bufio.NewScanner(log)
	s.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for line := 1; s.Scan(); line++ {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", line, err)
		}
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		if e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			continue // refused or failed: nothing was written
		}
		w := Writer{Program: strings.SplitN(e.UserAgent, "/", 2)[0], User: e.User.Username}
		if e.ImpersonatedUser != nil {
			w.User = e.ImpersonatedUser.Username
		}
		counts[w]++
	}
	return counts, s.Err()
}

// AuditWrites is CountWrites of the Dev's audit log so far.
func (d *Dev) AuditWrites() (map[Writer]int, error) {
	f, err := os.Open(d.AuditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return CountWrites(f)
}
