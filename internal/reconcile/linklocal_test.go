package reconcile

import (
	"net/netip"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kipvs/kipvs/internal/dataplane/iptables"
	"github.com/kipvs/kipvs/internal/dummyif/dummyiftest"
	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipset/ipsettest"
	"github.com/kipvs/kipvs/internal/ipvs/ipvstest"
	"github.com/kipvs/kipvs/internal/netfilter/netfiltertest"
	"github.com/kipvs/kipvs/internal/proxy"
)

// A link-local VIP left on kube-ipvs0 (an older kipvs bound 169.254.169.254 or fe80::1 for
// a Service that is gone) is kipvs's like any other address there: a full sync after a
// restart unbinds it, instead of leaving the node's metadata address hijacked. The kernel's
// own link-local address of the link (fe80::/64, there once someone brought the link up)
// is not a VIP and stays, and repeated full syncs find no drift.
func TestLinkLocalLeftoverVIPRemoved(t *testing.T) {
	for _, tc := range []struct {
		family inet.Family
		nf     inet.Family
		vips   []string
		want   string
	}{
		{inet.IPv4, inet.IPv4, []string{"169.254.169.254", "10.96.0.99"},
			"link kube-ipvs0 type dummy state UP\naddr fe80::8c4f:a1ff:fe2b:7c10/64\n"},
		{inet.IPv6, inet.IPv6, []string{"fe80::1", "fe80::a9fe:a9fe", "fd00:96::99"},
			"link kube-ipvs0 type dummy state UP\naddr fe80::8c4f:a1ff:fe2b:7c10/64\n"},
	} {
		t.Run(tc.family.String(), func(t *testing.T) {
			dummy := dummyiftest.NewFake("kube-ipvs0")
			if _, err := dummy.EnsureLink(); err != nil {
				t.Fatal(err)
			}
			dummy.SetUp(true) // the kernel adds the link's own fe80::/64
			for _, a := range tc.vips {
				if err := dummy.AddAddress(netip.MustParseAddr(a)); err != nil {
					t.Fatal(err)
				}
			}
			rec := New(Kernel{IPVS: ipvstest.NewFake(), Filter: iptables.New(tc.family, ipsettest.NewFake(), netfiltertest.NewFake(tc.nf)), Dummy: dummy},
				Options{Family: tc.family, Clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))})
			opts := &proxy.Options{Family: tc.family, Scheduler: "rr", NodeName: "node-a", MasqueradeBit: 14}
			d := proxy.NewDesired(tc.family)
			for i := range 3 {
				res, err := rec.FullSync(t.Context(), d, opts)
				if err != nil {
					t.Fatalf("full sync %d: %v", i+1, err)
				}
				if i > 0 && (!res.Plan.Empty() || len(res.Drift) != 0) {
					t.Errorf("full sync %d: plan\n%sdrift %v", i+1, res.Plan, res.Drift)
				}
			}
			if got, _ := dummy.Dump(); got != tc.want {
				t.Errorf("kube-ipvs0 after the syncs:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
