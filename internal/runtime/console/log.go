package console

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
)

// Log is a machine's console log: bytes are only ever added at its end while the machine
// lives.
type Log interface {
	io.ReaderAt
	// Size is how many bytes the log has now.
	Size() (int64, error)
}

// FileLog is a log kept in a file by someone else (QEMU's chardev logfile). A file not
// there yet is an empty log: a machine that has not started has written nothing.
type FileLog struct {
	Path string

	mu sync.Mutex
	f  *os.File
}

func (l *FileLog) open() (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		return l.f, nil
	}
	f, err := os.Open(l.Path)
	if err != nil {
		return nil, err
	}
	l.f = f
	return f, nil
}

func (l *FileLog) Size() (int64, error) {
	f, err := l.open()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (l *FileLog) ReadAt(p []byte, off int64) (int, error) {
	f, err := l.open()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, io.EOF
	}
	if err != nil {
		return 0, err
	}
	return f.ReadAt(p, off)
}

// Close closes the file, if it was opened.
func (l *FileLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// MemoryLog is a log kept in memory, at most limit bytes: what comes after is dropped,
// with one line saying so (the fake runtime's consoles).
type MemoryLog struct {
	limit int

	mu   sync.Mutex
	data []byte
	full bool
}

// NewMemoryLog returns an empty log that keeps at most limit bytes.
func NewMemoryLog(limit int) *MemoryLog { return &MemoryLog{limit: limit} }

// fullLine ends a MemoryLog that reached its limit.
const fullLine = "\n[console log full: later output dropped]\n"

// Write adds p at the end of the log; it never fails.
func (l *MemoryLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.full {
		return len(p), nil
	}
	if room := l.limit - len(l.data); len(p) > room {
		l.data = append(l.data, p[:max(room, 0)]...)
		l.data = append(l.data, fullLine...)
		l.full = true
		return len(p), nil
	}
	l.data = append(l.data, p...)
	return len(p), nil
}

func (l *MemoryLog) Size() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.data)), nil
}

func (l *MemoryLog) ReadAt(p []byte, off int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off >= int64(len(l.data)) {
		return 0, io.EOF
	}
	n := copy(p, l.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// pollInterval is how often a follower looks for more of the log: a typed line's echo
// reaches an attached caller within it.
const pollInterval = 50 * time.Millisecond

// readChunk is the one buffer each reader reads through.
const readChunk = 32 << 10

// Copy sends the log from offset from to its end and, with follow, what is added after,
// until ctx ends or gone says the machine is gone (what it wrote last is sent first). send
// must not keep the slice it is given. A log found shorter than what was read (cut by
// whoever keeps it) is read again from its start.
func Copy(ctx context.Context, log Log, from int64, follow bool, gone func() bool, send func([]byte) error) error {
	buf := make([]byte, readChunk)
	pos := from
	for {
		ended := gone()
		size, err := log.Size()
		if err != nil {
			return err
		}
		if size < pos {
			pos = 0
		}
		for pos < size {
			n, err := log.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
			if n > 0 {
				if err := send(buf[:n]); err != nil {
					return err
				}
				pos += int64(n)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if n == 0 {
				break
			}
		}
		if !follow || ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pollInterval):
		}
	}
}
