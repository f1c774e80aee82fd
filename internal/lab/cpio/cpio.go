// Package cpio writes the "newc" cpio archives the Linux kernel unpacks as
// its initramfs (Documentation/driver-api/early-userspace/buffer-format.rst).
// Archives may be concatenated; the kernel unpacks them in order.
package cpio

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// File mode type bits of the newc header (as in stat(2)).
const (
	TypeDir  = 0o040000
	TypeReg  = 0o100000
	TypeChar = 0o020000
)

// Writer writes one archive. Parent directories of every entry are added
// automatically, once each, because the kernel's unpacker does not create
// them.
type Writer struct {
	w    io.Writer
	n    int64
	ino  uint32
	dirs map[string]bool
	err  error
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, ino: 1, dirs: map[string]bool{".": true, "/": true, "": true}}
}

func clean(name string) string { return strings.TrimPrefix(path.Clean("/"+name), "/") }

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.w.Write(b)
	w.n += int64(n)
	w.err = err
}

func (w *Writer) pad(to int64) {
	if r := w.n % to; r != 0 {
		w.write(make([]byte, to-r))
	}
}

func (w *Writer) header(name string, mode, size, rdevMajor, rdevMinor uint32) {
	nlink := uint32(1)
	if mode&0o170000 == TypeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		w.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	w.ino++
	w.write([]byte(hdr))
	w.write(append([]byte(name), 0))
	w.pad(4)
}

func (w *Writer) parents(name string) {
	d := path.Dir(name)
	if w.dirs[d] {
		return
	}
	w.parents(d)
	w.dirs[d] = true
	w.header(d, TypeDir|0o755, 0, 0, 0)
}

// Dir adds a directory.
func (w *Writer) Dir(name string, perm uint32) error {
	name = clean(name)
	if w.dirs[name] {
		return w.err
	}
	w.parents(name)
	w.dirs[name] = true
	w.header(name, TypeDir|perm, 0, 0, 0)
	return w.err
}

// Bytes adds a regular file with the given contents.
func (w *Writer) Bytes(name string, perm uint32, data []byte) error {
	name = clean(name)
	w.parents(name)
	w.header(name, TypeReg|perm, uint32(len(data)), 0, 0)
	w.write(data)
	w.pad(4)
	return w.err
}

// File adds a regular file copied from src on the host.
func (w *Writer) File(name string, perm uint32, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > 1<<32-1 {
		return fmt.Errorf("cpio: %s is too large for newc", src)
	}
	name = clean(name)
	w.parents(name)
	w.header(name, TypeReg|perm, uint32(st.Size()), 0, 0)
	if w.err == nil {
		var n int64
		n, w.err = io.Copy(w.w, f)
		w.n += n
		if w.err == nil && n != st.Size() {
			w.err = fmt.Errorf("cpio: %s changed size while copying", src)
		}
	}
	w.pad(4)
	return w.err
}

// CharDev adds a character device node.
func (w *Writer) CharDev(name string, perm, major, minor uint32) error {
	name = clean(name)
	w.parents(name)
	w.header(name, TypeChar|perm, 0, major, minor)
	return w.err
}

// Close writes the trailer and pads the archive to 512 bytes so another
// archive can follow it. It does not close the underlying writer.
func (w *Writer) Close() error {
	w.header("TRAILER!!!", 0, 0, 0, 0)
	w.pad(512)
	return w.err
}
