package conntrack_test

import (
	"net/netip"

	"github.com/kipvs/kipvs/internal/conntrack"
	"github.com/kipvs/kipvs/internal/inet"
)

// deleteByOrigDst deletes the flows of proto sent to dst (see ByOrigDst).
func deleteByOrigDst(i conntrack.Interface, proto inet.Protocol, dst netip.AddrPort) (int, error) {
	return i.Delete(conntrack.ByOrigDst(proto, dst))
}

// deleteByReplySrc deletes the flows of proto answered by src (see ByReplySrc).
func deleteByReplySrc(i conntrack.Interface, proto inet.Protocol, src netip.Addr) (int, error) {
	return i.Delete(conntrack.ByReplySrc(proto, src))
}
