package mri

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"google.golang.org/grpc"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// CreateJournal makes the server append a line to the file at path for every
// CreateMachine it answers with a machine: the Machine's uid and the machine's id. A
// chaos run reads the journals of every runtime afterwards: one uid answered with two ids
// is a duplicate create, a second machine made for one Machine (after a lost record, or
// a create retried past a delete). The file is opened for appending, so it survives the
// runtime's restarts; a write is not synced, which a killed process does not need (the
// kernel keeps what was written).
func CreateJournal(path string) Option {
	return func(o *options) { o.journal = path }
}

// JournalEntry is one line of a create journal.
type JournalEntry struct {
	UID string `json:"uid"`
	ID  string `json:"id"`
}

// journal appends entries to its file, one JSON object a line.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	return &journal{f: f}, nil
}

// intercept records the answer of every successful CreateMachine.
func (j *journal) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if r, ok := resp.(*mriv1alpha1.CreateMachineResponse); ok && err == nil {
		md := r.GetMachine().GetMetadata()
		line, _ := json.Marshal(JournalEntry{UID: md.GetLabels()[LabelMachineUID], ID: md.GetId()})
		j.mu.Lock()
		_, _ = j.f.Write(append(line, '\n'))
		j.mu.Unlock()
	}
	return resp, err
}

func (j *journal) Close() error { return j.f.Close() }

// ReadJournal reads the entries of a create journal. A last line cut short by a kill is
// left out; any other line that does not read is an error.
func ReadJournal(path string) ([]JournalEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []JournalEntry
	var bad error
	s := bufio.NewScanner(f)
	for s.Scan() {
		if bad != nil {
			return nil, bad
		}
		var e JournalEntry
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			bad = fmt.Errorf("create journal %s: line %d: %w", path, len(out)+1, err)
			continue
		}
		out = append(out, e)
	}
	return out, s.Err()
}
