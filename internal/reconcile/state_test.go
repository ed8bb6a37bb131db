package reconcile

import (
	"net/netip"
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
)

func guardIPVSService() ipvs.Service {
	return ipvs.Service{
		ServiceKey: ipvs.ServiceKey{Family: inet.IPv4, Protocol: inet.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, FWMark: 1},
		Scheduler:  "sh", Flags: ipvs.FlagPersistent | ipvs.FlagSched1, Timeout: 60, Netmask: 0xffffff00, PEName: "sip",
		Stats: &ipvs.Stats{Conns: 1, InPkts: 2, OutPkts: 3, InBytes: 4, OutBytes: 5, CPS: 6, InPPS: 7, OutPPS: 8, InBPS: 9, OutBPS: 10},
	}
}

// serviceSettingsEqual decides whether a virtual server needs UpdateService: a setting it
// misses is never programmed on an existing virtual server (nor repaired as drift).
func TestServiceSettingsEqualChecksEveryField(t *testing.T) {
	fieldguard.Check(t, guardIPVSService(), map[string]string{
		"ServiceKey": "identifies the service: the callers compare the settings of one key",
		"Stats":      "counters the kernel reports, not settings",
	}, func(a, b ipvs.Service) bool { return !serviceSettingsEqual(a, b) })
}

// What the kernel normalizes or reports on its own is no difference.
func TestServiceSettingsEqualNormalizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b func(*ipvs.Service)
	}{
		{"hashed flag", func(s *ipvs.Service) { s.Flags |= ipvs.FlagHashed }, func(*ipvs.Service) {}},
		{"timeout of a service that is not persistent",
			func(s *ipvs.Service) { s.Flags &^= ipvs.FlagPersistent; s.Timeout = 0 },
			func(s *ipvs.Service) { s.Flags &^= ipvs.FlagPersistent }},
		{"zero netmask is the full one",
			func(s *ipvs.Service) { s.Netmask = 0 },
			func(s *ipvs.Service) { s.Netmask = ipvs.FullNetmask(inet.IPv4) }},
	} {
		a, b := guardIPVSService(), guardIPVSService()
		tc.a(&a)
		tc.b(&b)
		if !serviceSettingsEqual(a, b) || !serviceSettingsEqual(b, a) {
			t.Errorf("%s: flags %#x timeout %d netmask %#x and flags %#x timeout %d netmask %#x differ",
				tc.name, a.Flags, a.Timeout, a.Netmask, b.Flags, b.Timeout, b.Netmask)
		}
	}
}
