package kernel

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// fakeBzImage is a bzImage header (boot protocol 2.15, 2 setup sectors)
// with payload at payload_offset 0x40 of the protected-mode code.
func fakeBzImage(payload []byte) []byte {
	img := make([]byte, 3*512+0x40+len(payload)+16)
	img[0x1f1] = 2
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x206:], 0x20f)
	binary.LittleEndian.PutUint32(img[0x248:], 0x40)
	binary.LittleEndian.PutUint32(img[0x24c:], uint32(len(payload)))
	copy(img[3*512+0x40:], payload)
	return img
}

func TestBzImagePayload(t *testing.T) {
	for _, c := range []struct {
		payload, want []byte
		ext           string
	}{
		// xz and zstd end with the 4-byte size the build appends.
		{append([]byte("\xfd7zXZ\x00stream"), 1, 2, 3, 4), []byte("\xfd7zXZ\x00stream"), ".xz"},
		{append([]byte("\x28\xb5\x2f\xfdframe"), 1, 2, 3, 4), []byte("\x28\xb5\x2f\xfdframe"), ".zst"},
		{[]byte("\x1f\x8b\x08gzip-with-its-own-trailer"), []byte("\x1f\x8b\x08gzip-with-its-own-trailer"), ".gz"},
	} {
		got, ext, err := bzImagePayload(fakeBzImage(c.payload))
		if err != nil || ext != c.ext || !bytes.Equal(got, c.want) {
			t.Errorf("%s: %q %q %v, want %q", c.ext, got, ext, err, c.want)
		}
	}
	for _, c := range []struct {
		img  []byte
		want string
	}{
		{make([]byte, 4096), "not a bzImage"},
		{fakeBzImage([]byte("BZh91AY&SY-bzip2-payload")), "unknown format"},
		{fakeBzImage(nil)[:3*512], "outside"},
	} {
		if _, _, err := bzImagePayload(c.img); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one saying %q", err, c.want)
		}
	}
}
