package ironic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// schema is how one program's SQLite database is created and upgraded by its dbsync
// command (ironic-dbsync, ironic-inspector-dbsync).
type schema struct {
	dbsync string // the dbsync program's path
	conf   string
	db     string
	// create makes a schema in an empty database; upgrade migrates an existing one.
	create, upgrade string
}

// ensure creates the database when its file is missing or empty (SQLite creates an empty
// file when a program opens a deleted database), and runs the migrations on an existing
// one when upgrade is set (cheap and idempotent: about a second at the head revision).
func (s schema) ensure(ctx context.Context, upgrade bool) error {
	st, err := os.Stat(s.db)
	switch {
	case err == nil && st.Size() > 0:
		if !upgrade {
			return nil
		}
		return s.run(ctx, s.upgrade)
	case err == nil || errors.Is(err, os.ErrNotExist):
		if err := os.Remove(s.db); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the empty database %s: %w", s.db, err)
		}
		return s.run(ctx, s.create)
	default:
		return fmt.Errorf("checking the database %s: %w", s.db, err)
	}
}

func (s schema) run(ctx context.Context, command string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.dbsync, "--config-file", s.conf, command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w; its output ends with:\n%s", s.dbsync, command, err, lastLines(string(out), 15))
	}
	return nil
}
