package doorbell

import (
	"encoding/binary"
	"unsafe"
)

// bytesOf views w as bytes: 8-byte aligned memory, as a mapped page is.
func bytesOf(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 8*len(w))
}

func putBE32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }
