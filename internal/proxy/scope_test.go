package proxy

import (
	"testing"
)

func TestNodeSpecific(t *testing.T) {
	for _, c := range []struct {
		p    Problem
		want bool
	}{
		{Problem{Reason: "ExternalIPIsNodeAddress", Field: "spec.externalIPs[0]"}, true},
		{Problem{Reason: "ClusterIPIsNodeAddress", Field: "spec.clusterIPs[0]"}, true},
		{Problem{Reason: "SchedulerUnavailable"}, true},
		{Problem{Reason: ReasonSetCapacityExceeded}, true},
		{Problem{Reason: "SomeReasonNobodyKnows"}, true},
		{Problem{Reason: reasonVirtualServerConflict, Field: kindNodePort.field()}, true},
		{Problem{Reason: reasonVirtualServerConflict, Field: kindExternalIP.field()}, false},
		{Problem{Reason: "InvalidPort", Field: "spec.ports[0].port"}, false},
		{Problem{Reason: "UnusableExternalIP", Field: "spec.externalIPs[0]"}, false},
		{Problem{Reason: "ExternalIPNotAllowed", Field: "spec.externalIPs[0]"}, false},
	} {
		if got := NodeSpecific(c.p); got != c.want {
			t.Errorf("NodeSpecific(%s on %s) = %v, want %v", c.p.Reason, c.p.Field, got, c.want)
		}
	}
}
