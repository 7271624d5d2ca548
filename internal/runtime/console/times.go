package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A console log carries no times: whoever writes it (QEMU, a BMC session) writes bytes
// only. For since_seconds (CONTRACT.md C7) the runtime writes down, about once a second,
// the size of each log that grew, in a file beside it (TimesPath): "at this time the log
// had this many bytes". The bytes written after a time t then start at the size last
// written down at or before t, give or take that second, which the start may include.
// Output of a machine while its runtime was down counts as written when the runtime
// looked again.

// timed is a log that knows when it grew.
type timed interface {
	// SizeAt is the log's size as last written down at or before t: what follows was
	// written after that (0 when nothing was written down so early).
	SizeAt(t time.Time) (int64, error)
}

// TimesPath is the record of times of the log at path.
func TimesPath(path string) string { return path + ".times" }

// SizeAt reads the log's record of times (none: 0, the whole log).
func (l *FileLog) SizeAt(t time.Time) (int64, error) {
	f, err := os.Open(TimesPath(l.Path))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var size int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		at, n, ok := parseMark(sc.Text())
		if !ok {
			continue // a line cut by a crash
		}
		if at > t.UnixNano() {
			break
		}
		size = n
	}
	return size, sc.Err()
}

func parseMark(line string) (at, size int64, ok bool) {
	a, s, found := strings.Cut(line, " ")
	if !found {
		return 0, 0, false
	}
	at, err1 := strconv.ParseInt(a, 10, 64)
	size, err2 := strconv.ParseInt(s, 10, 64)
	return at, size, err1 == nil && err2 == nil
}

// RecordTimes writes down, every interval until ctx ends, the size of each log of logs()
// that grew since it last looked.
func RecordTimes(ctx context.Context, interval time.Duration, logs func() []string) {
	last := map[string]int64{}
	for {
		now := time.Now()
		seen := map[string]bool{}
		for _, path := range logs() {
			seen[path] = true
			fi, err := os.Stat(path)
			if err != nil || fi.Size() == last[path] {
				continue
			}
			if err := appendMark(path, now, fi.Size()); err == nil {
				last[path] = fi.Size()
			}
		}
		for path := range last {
			if !seen[path] {
				delete(last, path) // a machine gone
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func appendMark(path string, at time.Time, size int64) error {
	f, err := os.OpenFile(TimesPath(path), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d %d\n", at.UnixNano(), size)
	return errors.Join(err, f.Close())
}

// mark is a MemoryLog's record of a time: its size then. first is when the mark began:
// writes within a second of it move the mark instead of adding one, so a start taken
// from it includes at most a second too much.
type mark struct {
	first, at time.Time
	size      int64
}

// markLocked writes down the log's size after a write now. mu must be held.
func (l *MemoryLog) markLocked(now time.Time) {
	size := int64(len(l.data))
	if n := len(l.marks); n > 0 && now.Sub(l.marks[n-1].first) < time.Second {
		l.marks[n-1].at, l.marks[n-1].size = now, size
		return
	}
	l.marks = append(l.marks, mark{first: now, at: now, size: size})
}

// SizeAt is the log's size as written down at or before t.
func (l *MemoryLog) SizeAt(t time.Time) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.marks), func(i int) bool { return l.marks[i].at.After(t) })
	if i == 0 {
		return 0, nil
	}
	return l.marks[i-1].size, nil
}
