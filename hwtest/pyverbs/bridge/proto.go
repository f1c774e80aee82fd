package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/mlx5go/mlx5go/internal/uverbsabi"
	"golang.org/x/sys/unix"
)

// The protocol between the shim (hwtest/pyverbs/shim/mlx5bshim.c) and the
// bridge, on a SOCK_SEQPACKET unix socket per open of the character
// device: a record per message, fds by SCM_RIGHTS, integers in the
// machine's byte order. Each message starts with a u32 type and a u32
// (an errno in answers). The shim asks, the bridge answers with one
// opResult; while it works on an ioctl, the bridge may ask opMirror first
// (any number of times), which the shim answers with opMirrored.
//
//	opIoctl    shim:   the ioctl header and attributes as the caller gave
//	                   them, then the buffer of each attribute over 8 bytes
//	                   (its data is a pointer), in order
//	           result: the attributes (flags, new handles in the data of
//	                   those of length 0); u32 blobs, u32 passes; each blob
//	                   (u16 index, u16 0, u32 length, the bytes padded to
//	                   8) is what the caller's buffer of that attribute now
//	                   holds; each pass (u16 index, u16 where, u32 offset,
//	                   u32 token, u32 0) an fd, in order in SCM_RIGHTS, whose
//	                   number the shim writes in the attribute's data (where
//	                   0) or at offset in its buffer (where 1)
//	opFDMap    shim:   u32 count at the errno's place, then (u32 token, u32
//	                   fd) each: the caller's numbers for the fds passed
//	opMmap     shim:   u64 offset, u64 length of an mmap of the device
//	           result: u64 token, the page's memfd
//	opMunmap   shim:   u64 token
//	opRead     shim:   u32 fd at the errno's place, what the caller read of
//	                   an event fd (the destroy responses count it)
//	opCloseFD  shim:   u32 fd at the errno's place: the caller closed an
//	                   event fd
//	opMirror   bridge: u64 address, u64 length
//	opMirrored shim:   u32 segments, u32 0, then (u64 address, u64 length,
//	                   u64 prot) each, and its memfd in SCM_RIGHTS
//
// Closing the socket is closing the device context. The pager is one more
// connection of the program, to a socket of its own (MLX5B_PAGER), which
// a thread of the shim serves: on it the bridge asks opMirror at any
// time, for the ODP page faults the model raises (pager.go).
const (
	opIoctl    = 1
	opMmap     = 2
	opMunmap   = 3
	opRead     = 4
	opCloseFD  = 5
	opFDMap    = 6
	opMirrored = 7
	opResult   = 100
	opMirror   = 101
)

// maxMsg bounds a record (the shim's MAX_MSG).
const maxMsg = 256 << 10

// maxPass bounds the fds of one result (the shim's MAX_PASS).
const maxPass = 16

// A link is one connection of the shim's: a context's, or the pager's.
type link struct {
	conn *net.UnixConn
}

// exchange sends msg (with fds) and returns the next record and its fds.
func (x link) exchange(msg []byte, fds []int) ([]byte, []int, error) {
	if err := x.send(msg, fds); err != nil {
		return nil, nil, err
	}
	return x.recv()
}

func (x link) send(msg []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := x.conn.WriteMsgUnix(msg, oob, nil); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

func (x link) recv() ([]byte, []int, error) {
	b := make([]byte, maxMsg)
	oob := make([]byte, unix.CmsgSpace(4*64))
	n, oobn, flags, _, err := x.conn.ReadMsgUnix(b, oob)
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				if f, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, f...)
				}
			}
		}
	}
	if n == 0 {
		closeFDs(fds)
		return nil, nil, io.EOF
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeFDs(fds)
		return nil, nil, fmt.Errorf("record truncated: %w", unix.EMSGSIZE)
	}
	return b[:n], fds, nil
}

func header(op uint32, errno unix.Errno) []byte {
	b := binary.NativeEndian.AppendUint32(nil, op)
	return binary.NativeEndian.AppendUint32(b, uint32(errno))
}

// serve answers the shim's requests until it closes the connection.
func (x *context) serve() {
	defer x.close()
	for {
		b, fds, err := x.recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				tracef("connection: %v", err)
			}
			return
		}
		closeFDs(fds) // no request carries fds
		if len(b) < 8 {
			tracef("connection: a record of %d bytes", len(b))
			return
		}
		if err := x.handle(binary.NativeEndian.Uint32(b), b[4:8], b[8:]); err != nil {
			tracef("connection: %v", err)
			return
		}
	}
}

// handle answers one request; an error is the connection's.
func (x *context) handle(op uint32, word, p []byte) error {
	switch op {
	case opIoctl:
		return x.handleIoctl(p)
	case opMmap:
		if len(p) < 16 {
			return x.send(header(opResult, unix.EINVAL), nil)
		}
		token, fd, err := x.mmapPage(binary.NativeEndian.Uint64(p), binary.NativeEndian.Uint64(p[8:]))
		if err != nil {
			tracef("mmap: %v", err)
			return x.send(header(opResult, errnoOf(err)), nil)
		}
		defer unix.Close(fd)
		return x.send(binary.NativeEndian.AppendUint64(header(opResult, 0), token), []int{fd})
	case opMunmap:
		if len(p) < 8 {
			return x.send(header(opResult, unix.EINVAL), nil)
		}
		return x.send(header(opResult, errnoOf(x.munmapPage(binary.NativeEndian.Uint64(p)))), nil)
	case opRead:
		readNotice(int(binary.NativeEndian.Uint32(word)), p)
		return x.send(header(opResult, 0), nil)
	case opCloseFD:
		closeNotice(int(binary.NativeEndian.Uint32(word)))
		return x.send(header(opResult, 0), nil)
	}
	return x.send(header(opResult, unix.EPROTONOSUPPORT), nil)
}

// handleIoctl runs one ioctl and answers it; fds the call made go with
// the answer, and the shim's FDMAP names the caller's numbers for them.
func (x *context) handleIoctl(p []byte) error {
	c, err := parseCall(p)
	if err != nil {
		return x.send(header(opResult, errnoOf(err)), nil)
	}
	e := x.ioctl(c)
	if e != 0 || len(c.passes) > maxPass {
		for _, ps := range c.passes {
			unix.Close(ps.fd)
		}
		c.passes = nil
	}
	out := header(opResult, e)
	out, err = binary.Append(out, binary.NativeEndian, c.attrs)
	if err != nil {
		return err
	}
	var blobs []byte
	nblobs := 0
	for i, b := range c.bufs {
		if b == nil || !c.small[i] && string(b) == string(c.orig[i]) {
			continue
		}
		blobs = binary.NativeEndian.AppendUint16(blobs, uint16(i))
		blobs = binary.NativeEndian.AppendUint16(blobs, 0)
		blobs = binary.NativeEndian.AppendUint32(blobs, uint32(len(b)))
		blobs = append(blobs, b...)
		for len(blobs)%8 != 0 {
			blobs = append(blobs, 0)
		}
		nblobs++
	}
	out = binary.NativeEndian.AppendUint32(out, uint32(nblobs))
	out = binary.NativeEndian.AppendUint32(out, uint32(len(c.passes)))
	out = append(out, blobs...)
	fds := make([]int, 0, len(c.passes))
	for i, ps := range c.passes {
		where := uint16(0)
		if ps.inBuf {
			where = 1
		}
		out = binary.NativeEndian.AppendUint16(out, uint16(ps.index))
		out = binary.NativeEndian.AppendUint16(out, where)
		out = binary.NativeEndian.AppendUint32(out, ps.off)
		out = binary.NativeEndian.AppendUint32(out, uint32(i))
		out = binary.NativeEndian.AppendUint32(out, 0)
		fds = append(fds, ps.fd)
	}
	if len(out) > maxMsg {
		closeFDs(fds)
		return x.send(header(opResult, unix.E2BIG), nil)
	}
	if len(fds) == 0 {
		return x.send(out, nil)
	}
	defer closeFDs(fds)
	b, rfds, err := x.exchange(out, fds)
	if err != nil {
		return err
	}
	closeFDs(rfds)
	if len(b) < 8 || binary.NativeEndian.Uint32(b) != opFDMap || int(binary.NativeEndian.Uint32(b[4:])) != len(c.passes) || len(b) < 8+8*len(c.passes) {
		return fmt.Errorf("fdmap: malformed: %w", unix.EPROTO)
	}
	for i := range c.passes {
		token := binary.NativeEndian.Uint32(b[8+8*i:])
		fd := int(int32(binary.NativeEndian.Uint32(b[12+8*i:])))
		if int(token) < len(c.passes) {
			c.passes[token].install(fd)
		}
	}
	return x.send(header(opResult, 0), nil)
}

// The attribute layout the protocol carries is the kernel's.
var _ = [1]struct{}{}[uverbsabi.SizeofIbUverbsAttr-16]
