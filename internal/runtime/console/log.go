package console

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
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
	// watcher tells of writes to the file (inotify), so a follower need not poll; nil
	// until first asked, or when the host has no inotify instance left (followers then poll).
	watcher *fsnotify.Watcher
	watched bool
	signal  chan struct{}
}

// grown returns a channel closed at the next write to the file, or nil when writes
// cannot be watched.
func (l *FileLog) grown() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.watched {
		l.watched = true
		if w, err := fsnotify.NewWatcher(); err == nil {
			// The folder, not the file: the file may not exist yet.
			if err := w.Add(filepath.Dir(l.Path)); err != nil {
				w.Close()
			} else {
				l.watcher = w
				go l.relay(w)
			}
		}
	}
	if l.watcher == nil {
		return nil
	}
	if l.signal == nil {
		l.signal = make(chan struct{})
	}
	return l.signal
}

// relay turns the watcher's events for the file into closed signals until the watcher is
// closed. Its errors (a queue overflow) are read and dropped: the interval look covers them.
func (l *FileLog) relay(w *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Name != l.Path || !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Create) {
				continue
			}
			l.mu.Lock()
			if l.signal != nil {
				close(l.signal)
				l.signal = nil
			}
			l.mu.Unlock()
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
		}
	}
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

// Close closes the file and the watcher, if they were opened.
func (l *FileLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watcher != nil {
		l.watcher.Close()
		l.watcher = nil
	}
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

	mu     sync.Mutex
	data   []byte
	full   bool
	signal chan struct{}
	// marks are when it grew (times.go).
	marks []mark
}

// grown returns a channel closed at the next write.
func (l *MemoryLog) grown() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.signal == nil {
		l.signal = make(chan struct{})
	}
	return l.signal
}

// NewMemoryLog returns an empty log that keeps at most limit bytes.
func NewMemoryLog(limit int) *MemoryLog { return &MemoryLog{limit: limit} }

// fullLine ends a MemoryLog that reached its limit.
const fullLine = "\n[console log full: later output dropped]\n"

// Write adds p at the end of the log; it never fails.
func (l *MemoryLog) Write(p []byte) (int, error) { return l.write(p, time.Now()) }

func (l *MemoryLog) write(p []byte, now time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.signal != nil {
		close(l.signal)
		l.signal = nil
	}
	if l.full {
		return len(p), nil
	}
	defer l.markLocked(now)
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

// pollInterval is how often a follower looks for more of a log that cannot say when it
// grows: a typed line's echo reaches an attached caller within it. A log that can say so
// (a watched file, memory) is still looked at every watchedInterval, which is also how soon
// a follower of a deleted machine ends.
const (
	pollInterval    = 50 * time.Millisecond
	watchedInterval = time.Second
)

// waiter is a log that can say when it may have grown.
type waiter interface {
	// grown returns a channel closed when the log may have grown since the call, or nil
	// when it cannot tell.
	grown() <-chan struct{}
}

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
		// Asked before the size is read, so a write in between is not missed.
		var wake <-chan struct{}
		if w, ok := log.(waiter); ok && follow {
			wake = w.grown()
		}
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
		wait := pollInterval
		if wake != nil {
			wait = watchedInterval
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(wait):
		}
	}
}
