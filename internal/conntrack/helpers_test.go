package conntrack

import (
	"net/netip"

	"github.com/kipvs/kipvs/internal/inet"
)

// deleteByOrigDst deletes the flows of proto sent to dst (see ByOrigDst).
func deleteByOrigDst(i Interface, proto inet.Protocol, dst netip.AddrPort) (int, error) {
	return i.Delete(ByOrigDst(proto, dst))
}

// deleteByReplySrc deletes the flows of proto answered by src (see ByReplySrc).
func deleteByReplySrc(i Interface, proto inet.Protocol, src netip.Addr) (int, error) {
	return i.Delete(ByReplySrc(proto, src))
}
