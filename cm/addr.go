package cm

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// PortSpace is the RDMA CM port space of an address: it decides the
// transport. TCP connects RC QPs; UDP resolves UD QPs (the IB CM's SIDR).
type PortSpace uint16

// Port spaces (enum rdma_ucm_port_space).
const (
	TCP PortSpace = 0x0106 // RDMA_PS_TCP: RC
	UDP PortSpace = 0x0111 // RDMA_PS_UDP: UD
)

func (ps PortSpace) String() string {
	switch ps {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint16(ps))
}

// Addr is an RDMA CM address: an IP address and port in a port space. It
// implements net.Addr.
type Addr struct {
	Space    PortSpace
	AddrPort netip.AddrPort
}

// Network is "rdma-tcp" or "rdma-udp".
func (a Addr) Network() string { return "rdma-" + a.Space.String() }

// String is the address and port, as net.TCPAddr prints them.
func (a Addr) String() string { return a.AddrPort.String() }

// networks are what Dial and Listen take: the port space, and the IP
// version ("" for either).
var networks = map[string]struct {
	ps  PortSpace
	ver string
}{
	"tcp": {TCP, ""}, "tcp4": {TCP, "4"}, "tcp6": {TCP, "6"},
	"udp": {UDP, ""}, "udp4": {UDP, "4"}, "udp6": {UDP, "6"},
	"rdma-tcp": {TCP, ""}, "rdma-udp": {UDP, ""},
}

// ResolveAddr parses address ("host:port", as net.Dial takes it) in
// network ("tcp", "tcp4", "tcp6" for RC; "udp", "udp4", "udp6" for UD). A
// host name is looked up with the default resolver; an IPv6 zone names
// the interface (by name or number) a link-local address is on. An empty
// host is the unspecified address (listen on every device).
func ResolveAddr(ctx context.Context, network, address string) (Addr, error) {
	n, ok := networks[network]
	if !ok {
		return Addr{}, fmt.Errorf("unknown network %q: want tcp, tcp4, tcp6 (RC) or udp, udp4, udp6 (UD)", network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return Addr{}, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return Addr{}, fmt.Errorf("port %q: want a number from 0 to 65535", portStr)
	}
	var ip netip.Addr
	switch {
	case host == "" && n.ver == "6":
		ip = netip.IPv6Unspecified()
	case host == "":
		ip = netip.IPv4Unspecified()
	default:
		if ip, err = netip.ParseAddr(host); err != nil {
			ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip"+n.ver, host)
			if lerr != nil {
				return Addr{}, lerr
			}
			if len(ips) == 0 {
				return Addr{}, fmt.Errorf("%s has no IP address", host)
			}
			ip = ips[0]
		}
	}
	ip = ip.Unmap()
	switch {
	case n.ver == "4" && !ip.Is4(), n.ver == "6" && !ip.Is6():
		return Addr{}, fmt.Errorf("%v is not an IPv%s address", ip, n.ver)
	}
	return Addr{Space: n.ps, AddrPort: netip.AddrPortFrom(ip, uint16(port))}, nil
}
