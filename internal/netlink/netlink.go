// Package netlink is a minimal netlink client: request/acknowledge and dump
// exchanges over AF_NETLINK sockets, with attribute encoding and decoding.
//
// It serves the RDMA netlink (nldev) queries of package uverbs and the
// rtnetlink and RDMA link set-up done by the kernel lab's guest init. It knows
// no protocol beyond netlink's own framing (linux/netlink.h) and imports only
// golang.org/x/sys/unix.
package netlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Message header and attribute sizes from linux/netlink.h.
const (
	headerLen = unix.SizeofNlMsghdr // struct nlmsghdr
	attrLen   = unix.SizeofNlAttr   // struct nlattr
	// NestedFlag is NLA_F_NESTED, set on the type of an attribute that holds
	// attributes.
	NestedFlag   = unix.NLA_F_NESTED
	attrTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
)

var native = binary.NativeEndian

// Conn is a netlink socket bound to one protocol. Its methods are safe for
// concurrent use; requests are serialised.
type Conn struct {
	mu    sync.Mutex
	fd    int
	proto int
	seq   uint32
	buf   []byte
}

// Dial opens a netlink socket for protocol proto (unix.NETLINK_ROUTE,
// unix.NETLINK_RDMA, ...).
func Dial(proto int) (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("netlink: socket(proto %d): %w", proto, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink: bind(proto %d): %w", proto, err)
	}
	// A kernel that never answers must not hang the caller forever.
	tv := unix.NsecToTimeval(int64(10 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink: set receive timeout: %w", err)
	}
	return &Conn{fd: fd, proto: proto, buf: make([]byte, 64<<10)}, nil
}

// Close closes the socket. Closing twice is safe and returns nil.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// Error is a negative acknowledgement from the kernel. It unwraps to the
// errno, so errors.Is(err, unix.EOPNOTSUPP) works.
type Error struct {
	Type  uint16 // message type of the request
	Errno unix.Errno
}

func (e *Error) Error() string {
	return fmt.Sprintf("netlink: request type %d: %v", e.Type, e.Errno)
}

func (e *Error) Unwrap() error { return e.Errno }

// Request sends one message of type typ with payload and the given extra
// flags (unix.NLM_F_DUMP, unix.NLM_F_CREATE, ...). NLM_F_REQUEST and
// NLM_F_ACK are always set. It returns the payloads of the replies that carry
// data, in order, and an *Error if the kernel refused the request.
func (c *Conn) Request(typ uint16, flags uint16, payload []byte) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil, errors.New("netlink: request on closed socket")
	}
	c.seq++
	seq := c.seq
	msg := make([]byte, headerLen+len(payload))
	native.PutUint32(msg[0:], uint32(len(msg)))
	native.PutUint16(msg[4:], typ)
	native.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	native.PutUint32(msg[8:], seq)
	copy(msg[headerLen:], payload)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("netlink: send type %d: %w", typ, err)
	}
	var out [][]byte
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return nil, fmt.Errorf("netlink: receive type %d: %w", typ, err)
		}
		b := c.buf[:n]
		for len(b) >= headerLen {
			l := int(native.Uint32(b[0:]))
			if l < headerLen || l > len(b) {
				return nil, fmt.Errorf("netlink: malformed reply (length %d of %d)", l, len(b))
			}
			mtyp := native.Uint16(b[4:])
			mseq := native.Uint32(b[8:])
			body := b[headerLen:l]
			b = b[min(len(b), align4(l)):]
			if mseq != seq {
				continue
			}
			switch mtyp {
			case unix.NLMSG_ERROR:
				if len(body) < 4 {
					return nil, errors.New("netlink: short error message")
				}
				if e := int32(native.Uint32(body)); e != 0 {
					return out, &Error{Type: typ, Errno: unix.Errno(-e)}
				}
				return out, nil // ACK
			case unix.NLMSG_DONE:
				// A dump ends with DONE, carrying the dump's error code; the
				// kernel sends no separate ACK after it.
				if len(body) >= 4 {
					if e := int32(native.Uint32(body)); e != 0 {
						return out, &Error{Type: typ, Errno: unix.Errno(-e)}
					}
				}
				return out, nil
			case unix.NLMSG_NOOP:
				continue
			default:
				out = append(out, append([]byte(nil), body...))
			}
		}
	}
}

func align4(n int) int { return (n + 3) &^ 3 }

// Attrs builds a sequence of netlink attributes.
type Attrs struct {
	b []byte
}

// Bytes returns the encoded attributes.
func (a *Attrs) Bytes() []byte { return a.b }

// Raw appends an attribute holding data.
func (a *Attrs) Raw(typ uint16, data []byte) {
	var h [attrLen]byte
	native.PutUint16(h[0:], uint16(attrLen+len(data)))
	native.PutUint16(h[2:], typ)
	a.b = append(a.b, h[:]...)
	a.b = append(a.b, data...)
	for len(a.b)%4 != 0 {
		a.b = append(a.b, 0)
	}
}

// String appends a NUL-terminated string attribute.
func (a *Attrs) String(typ uint16, s string) { a.Raw(typ, append([]byte(s), 0)) }

// Uint32 appends a 32-bit attribute in host byte order.
func (a *Attrs) Uint32(typ uint16, v uint32) {
	var d [4]byte
	native.PutUint32(d[:], v)
	a.Raw(typ, d[:])
}

// Nested appends an attribute of type typ|NestedFlag holding what fn adds.
func (a *Attrs) Nested(typ uint16, fn func(*Attrs)) {
	var in Attrs
	fn(&in)
	a.Raw(typ|NestedFlag, in.b)
}

// Attr is one decoded attribute.
type Attr struct {
	Type uint16 // with the nested and byte-order flags cleared
	Data []byte
}

// ParseAttrs decodes a sequence of attributes.
func ParseAttrs(b []byte) ([]Attr, error) {
	var out []Attr
	for len(b) > 0 {
		if len(b) < attrLen {
			return out, fmt.Errorf("netlink: %d trailing bytes in attributes", len(b))
		}
		l := int(native.Uint16(b[0:]))
		if l < attrLen || l > len(b) {
			return out, fmt.Errorf("netlink: attribute length %d out of range", l)
		}
		out = append(out, Attr{Type: native.Uint16(b[2:]) & attrTypeMask, Data: b[attrLen:l]})
		b = b[min(len(b), align4(l)):]
	}
	return out, nil
}

// String returns a string attribute's value without its NUL terminator.
func (a Attr) String() string {
	d := a.Data
	for len(d) > 0 && d[len(d)-1] == 0 {
		d = d[:len(d)-1]
	}
	return string(d)
}

// Uint32 returns a 32-bit attribute's value, or 0 if it is shorter.
func (a Attr) Uint32() uint32 {
	if len(a.Data) < 4 {
		return 0
	}
	return native.Uint32(a.Data)
}

// Uint64 returns a 64-bit attribute's value, or 0 if it is shorter.
func (a Attr) Uint64() uint64 {
	if len(a.Data) < 8 {
		return 0
	}
	return native.Uint64(a.Data)
}
