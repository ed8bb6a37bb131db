package svcstats

import (
	"testing"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
)

// A scrape keeps its plan only while samePlanInput finds every virtual server the same:
// a change of any field the plan is built from must make it build a new one. The real
// server count is not one of them.
func TestSamePlanInputGuard(t *testing.T) {
	base := debugapi.VirtualServer{Protocol: "TCP", Address: "10.96.0.10", Port: 80, Kind: "ClusterIP",
		Namespace: "default", Name: "web", PortName: "http", Destinations: 3}
	fieldguard.Check(t, base, map[string]string{"Destinations": "the plan does not depend on the real servers"},
		func(a, b debugapi.VirtualServer) bool {
			return !samePlanInput([]debugapi.VirtualServer{a}, []debugapi.VirtualServer{b})
		})
}
