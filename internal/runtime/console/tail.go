package console

import "io"

// tailChunk is how much of the log TailStart reads at a time, backwards from its end.
const tailChunk = 8 << 10

// TailStart returns the offset at which the last lines lines of a log of size bytes
// begin: 0 when the log has no more lines than that. A last line without its newline
// counts as a line. lines below one means the whole log.
func TailStart(log io.ReaderAt, size, lines int64) (int64, error) {
	if lines < 1 || size <= 0 {
		return 0, nil
	}
	buf := make([]byte, tailChunk)
	// A newline that ends the log ends its last line; it does not start another.
	end := size
	var last [1]byte
	if _, err := log.ReadAt(last[:], size-1); err != nil && err != io.EOF {
		return 0, err
	}
	if last[0] == '\n' {
		end--
	}
	seen := int64(0)
	for end > 0 {
		start := max(end-tailChunk, 0)
		chunk := buf[:end-start]
		if _, err := log.ReadAt(chunk, start); err != nil && err != io.EOF {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' {
				continue
			}
			if seen++; seen == lines {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}
