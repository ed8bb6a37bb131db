package ipvs

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"syscall"
	"testing"
)

// parseMessages splits a datagram exactly as syscall.ParseNetlinkMessage does (headers,
// data, and EINVAL for a malformed length), into a reused slice: random datagrams of
// well-formed messages, with lengths broken at random.
func TestParseMessagesMatchesSyscall(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var reused []syscall.NetlinkMessage
	for i := range 20000 {
		var b []byte
		for range rng.IntN(5) {
			data := make([]byte, rng.IntN(40))
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			l := 16 + len(data)
			h := make([]byte, 16)
			binary.NativeEndian.PutUint32(h[0:4], uint32(l))
			binary.NativeEndian.PutUint16(h[4:6], uint16(rng.Uint32()))
			binary.NativeEndian.PutUint16(h[6:8], uint16(rng.Uint32()))
			binary.NativeEndian.PutUint32(h[8:12], rng.Uint32())
			binary.NativeEndian.PutUint32(h[12:16], rng.Uint32())
			b = append(append(b, h...), data...)
			if rng.IntN(3) > 0 { // the padding, most of the time
				b = append(b, make([]byte, nlmAlign(l)-l)...)
			}
		}
		if len(b) >= 4 && rng.IntN(4) == 0 {
			binary.NativeEndian.PutUint32(b[0:4], rng.Uint32N(uint32(len(b)+20)))
		}
		if rng.IntN(8) == 0 {
			b = b[:rng.IntN(len(b)+1)]
		}
		want, wantErr := syscall.ParseNetlinkMessage(b)
		var err error
		reused, err = parseMessages(reused[:0], b)
		if (err != nil) != (wantErr != nil) || (err == nil && len(want)+len(reused) > 0 && !reflect.DeepEqual(reused, want)) {
			t.Fatalf("datagram %d (% x):\nparseMessages %v, %v\nsyscall       %v, %v", i, b, reused, err, want, wantErr)
		}
	}
}
