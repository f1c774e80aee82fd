package ucma

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"unsafe"

	"github.com/mlx5go/mlx5go/internal/ucmaabi"
)

// putSockaddr writes ap into ss as struct sockaddr_in (an IPv4 address)
// or struct sockaddr_in6 and returns its size. An IPv6 zone is the scope
// id: a number, or the name of a network interface.
func putSockaddr(ss *ucmaabi.SockaddrStorage, ap netip.AddrPort) (uint16, error) {
	*ss = ucmaabi.SockaddrStorage{}
	a := ap.Addr()
	b := (*[ucmaabi.SizeofSockaddrStorage]byte)(unsafe.Pointer(ss))
	switch {
	case !a.IsValid():
		return 0, fmt.Errorf("no address")
	case a.Is4():
		ss.Family = ucmaabi.AF_INET
		binary.BigEndian.PutUint16(b[2:4], ap.Port())
		v4 := a.As4()
		copy(b[4:8], v4[:])
		return ucmaabi.SizeofSockaddrIn, nil
	}
	scope, err := scopeID(a.Zone())
	if err != nil {
		return 0, err
	}
	ss.Family = ucmaabi.AF_INET6
	binary.BigEndian.PutUint16(b[2:4], ap.Port())
	v6 := a.As16()
	copy(b[8:24], v6[:])
	binary.NativeEndian.PutUint32(b[24:28], scope)
	return ucmaabi.SizeofSockaddrIn6, nil
}

// putSockaddrIn6 writes ap into a struct sockaddr_in6, which the legacy
// commands take for both families (AF_INET fits in its first 16 bytes).
func putSockaddrIn6(sa *ucmaabi.SockaddrIn6, ap netip.AddrPort) error {
	var ss ucmaabi.SockaddrStorage
	if _, err := putSockaddr(&ss, ap); err != nil {
		return err
	}
	copy((*[ucmaabi.SizeofSockaddrIn6]byte)(unsafe.Pointer(sa))[:], (*[ucmaabi.SizeofSockaddrStorage]byte)(unsafe.Pointer(&ss))[:ucmaabi.SizeofSockaddrIn6])
	return nil
}

func scopeID(zone string) (uint32, error) {
	if zone == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, fmt.Errorf("IPv6 zone %q: %w", zone, err)
	}
	return uint32(ifi.Index), nil
}

// sockaddr decodes an AF_INET or AF_INET6 address from b (a struct
// sockaddr_storage or sockaddr_in6); other families (AF_IB, none) give
// the zero AddrPort. An IPv6 scope id becomes a numeric zone.
func sockaddr(b []byte) netip.AddrPort {
	if len(b) < 2 {
		return netip.AddrPort{}
	}
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case ucmaabi.AF_INET:
		if len(b) < ucmaabi.SizeofSockaddrIn {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
	case ucmaabi.AF_INET6:
		if len(b) < ucmaabi.SizeofSockaddrIn6 {
			return netip.AddrPort{}
		}
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.NativeEndian.Uint32(b[24:28]); scope != 0 {
			a = a.WithZone(strconv.FormatUint(uint64(scope), 10))
		}
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[2:4]))
	}
	return netip.AddrPort{}
}

func storageBytes(ss *ucmaabi.SockaddrStorage) []byte {
	return (*[ucmaabi.SizeofSockaddrStorage]byte)(unsafe.Pointer(ss))[:]
}

func in6Bytes(sa *ucmaabi.SockaddrIn6) []byte {
	return (*[ucmaabi.SizeofSockaddrIn6]byte)(unsafe.Pointer(sa))[:]
}

// be64 reads a big-endian 64-bit field the kernel copied as it holds it
// (node_guid).
func be64(v uint64) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

func be16(v uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
}

func be32(b [4]byte) uint32 { return binary.BigEndian.Uint32(b[:]) }
