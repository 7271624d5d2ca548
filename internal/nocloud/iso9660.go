package nocloud

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf16"
)

// An ISO9660 (ECMA-119) image of files in its root folder, with a Joliet supplementary
// volume descriptor naming them in UCS-2, laid out as:
//
//	0-15 system area | 16 primary descriptor | 17 Joliet descriptor | 18 terminator |
//	19-22 path tables (primary L, M; Joliet L, M) | 23 primary root | 24 Joliet root |
//	data | 150 sectors of padding
//
// Both trees point at the same file extents. The padding is mkisofs's: filesystem probes
// (busybox's volume_id among them) read well past the descriptors and give up on a device
// shorter than that.

const (
	sectorSize        = 2048
	primaryDescriptor = 16
	jolietDescriptor  = 17
	terminator        = 18
	pathTables        = 19 // four one-sector tables
	primaryRoot       = 23
	jolietRoot        = 24
	firstData         = 25
	pathTableSize     = 10 // the root's record, the only folder
	padding           = 150
)

// isoFile is a file in the image's root folder; name is its Joliet (long) name.
type isoFile struct {
	name string
	data []byte
}

// recorded is every timestamp in the image: fixed, so the same files give the same bytes.
var recorded = [7]byte{70, 1, 1, 0, 0, 0, 0} // 1970-01-01 00:00:00 UTC

func buildISO(volumeID string, files []isoFile) ([]byte, error) {
	if len(volumeID) == 0 || len(volumeID) > 16 {
		return nil, fmt.Errorf("volume id %q: want 1 to 16 characters", volumeID)
	}
	files = append([]isoFile(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	seen := map[string]bool{}
	for _, f := range files {
		if f.name == "" || len(f.name) > 64 || strings.ContainsAny(f.name, "/\x00") {
			return nil, fmt.Errorf("file name %q: want 1 to 64 characters without / or NUL", f.name)
		}
		if seen[string(primaryName(f.name))] {
			return nil, fmt.Errorf("file names clash as ISO9660 names: %q", f.name)
		}
		seen[string(primaryName(f.name))] = true
	}

	extents := make([]uint32, len(files))
	next := uint64(firstData)
	for i, f := range files {
		extents[i] = uint32(next)
		next += uint64(sectors(len(f.data)))
	}
	next += padding
	if next > math.MaxUint32 {
		return nil, errors.New("too much data for a NoCloud seed")
	}
	total := uint32(next)
	image := make([]byte, int(total)*sectorSize)

	primary := rootFolder(files, extents, primaryRoot, primaryName)
	joliet := rootFolder(files, extents, jolietRoot, jolietName)
	if len(primary) > sectorSize || len(joliet) > sectorSize {
		return nil, errors.New("file names too long for a one-sector folder")
	}
	copy(sector(image, primaryRoot), primary)
	copy(sector(image, jolietRoot), joliet)

	// The volume id is kept as given (cloud-init looks for lower-case cidata), as mkisofs does.
	writeDescriptor(sector(image, primaryDescriptor), 1, volumeID, total, pathTables,
		directoryRecord([]byte{0}, primaryRoot, sectorSize, true), spacePadded)
	j := sector(image, jolietDescriptor)
	writeDescriptor(j, 2, volumeID, total, pathTables+2,
		directoryRecord([]byte{0}, jolietRoot, sectorSize, true), ucs2Padded)
	copy(j[88:], "%/E") // escape sequence: Joliet level 3

	t := sector(image, terminator)
	t[0] = 255
	copy(t[1:], "CD001")
	t[6] = 1

	for i, root := range []uint32{primaryRoot, primaryRoot, jolietRoot, jolietRoot} {
		rec := sector(image, pathTables+uint32(i))
		rec[0] = 1    // identifier length: the root's is one NUL byte
		if i%2 == 0 { // L table: little-endian
			binary.LittleEndian.PutUint32(rec[2:], root)
			binary.LittleEndian.PutUint16(rec[6:], 1)
		} else { // M table: big-endian
			binary.BigEndian.PutUint32(rec[2:], root)
			binary.BigEndian.PutUint16(rec[6:], 1)
		}
	}

	for i, f := range files {
		copy(image[int(extents[i])*sectorSize:], f.data)
	}
	return image, nil
}

// writeDescriptor fills a primary (kind 1) or supplementary (kind 2) volume descriptor;
// text writes an identifier field in that descriptor's character set.
func writeDescriptor(d []byte, kind byte, volumeID string, total, pathTable uint32, root []byte, text func([]byte, string)) {
	d[0] = kind
	copy(d[1:], "CD001")
	d[6] = 1
	text(d[8:40], "")        // system identifier
	text(d[40:72], volumeID) // volume identifier
	bothEndian32(d[80:], total)
	bothEndian16(d[120:], 1) // volume set size
	bothEndian16(d[124:], 1) // volume sequence number
	bothEndian16(d[128:], sectorSize)
	bothEndian32(d[132:], pathTableSize)
	binary.LittleEndian.PutUint32(d[140:], pathTable)
	binary.BigEndian.PutUint32(d[148:], pathTable+1)
	copy(d[156:190], root)
	for _, field := range [][2]int{{190, 318}, {318, 446}, {446, 574}, {574, 702}, {702, 739}, {739, 776}, {776, 813}} {
		text(d[field[0]:field[1]], "") // volume set, publisher, preparer, application, files
	}
	for off := 813; off < 881; off += 17 { // creation, modification, expiration, effective
		copy(d[off:], "1970010100000000")
	}
	d[881] = 1 // file structure version
}

// rootFolder is the root folder's records: itself, its parent (itself) and the files.
func rootFolder(files []isoFile, extents []uint32, self uint32, name func(string) []byte) []byte {
	out := directoryRecord([]byte{0}, self, sectorSize, true)
	out = append(out, directoryRecord([]byte{1}, self, sectorSize, true)...)
	for i, f := range files {
		out = append(out, directoryRecord(name(f.name), extents[i], uint32(len(f.data)), false)...)
	}
	return out
}

func directoryRecord(id []byte, extent, size uint32, folder bool) []byte {
	n := 33 + len(id)
	if n%2 == 1 {
		n++ // records start on even bytes
	}
	r := make([]byte, n)
	r[0] = byte(n)
	bothEndian32(r[2:], extent)
	bothEndian32(r[10:], size)
	copy(r[18:25], recorded[:])
	if folder {
		r[25] = 2
	}
	bothEndian16(r[28:], 1) // volume sequence number
	r[32] = byte(len(id))
	copy(r[33:], id)
	return r
}

// primaryName maps a name to at most 31 ISO9660 d-characters (A-Z, 0-9, _) with a
// version: user-data becomes USER_DATA.;1.
func primaryName(name string) []byte {
	base, ext, _ := strings.Cut(strings.ToUpper(name), ".")
	clean := func(s string, max int) string {
		if len(s) > max {
			s = s[:max]
		}
		return strings.Map(func(r rune) rune {
			if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, s)
	}
	ext = clean(ext, 8)
	return []byte(clean(base, 31-len(ext)-3) + "." + ext + ";1")
}

// jolietName is a name in UCS-2, big-endian.
func jolietName(name string) []byte {
	units := utf16.Encode([]rune(name))
	out := make([]byte, 2*len(units))
	for i, u := range units {
		binary.BigEndian.PutUint16(out[2*i:], u)
	}
	return out
}

// ucs2Padded writes s in UCS-2 big-endian, padded with spaces.
func ucs2Padded(field []byte, s string) {
	enc := jolietName(s)
	for i := 0; i+1 < len(field); i += 2 {
		if i+1 < len(enc) {
			field[i], field[i+1] = enc[i], enc[i+1]
		} else {
			field[i], field[i+1] = 0, ' '
		}
	}
}

// spacePadded writes s in bytes, padded with spaces.
func spacePadded(field []byte, s string) {
	for i := range field {
		if i < len(s) {
			field[i] = s[i]
		} else {
			field[i] = ' '
		}
	}
}

func sector(image []byte, n uint32) []byte {
	return image[int(n)*sectorSize : int(n+1)*sectorSize]
}

// sectors is how many sectors n bytes take; an empty file still gets its own (empty) extent.
func sectors(n int) int {
	if n == 0 {
		return 1
	}
	return (n + sectorSize - 1) / sectorSize
}

func bothEndian16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

func bothEndian32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}
