// Package watchtest holds the helpers that the tests of package watch and of its file
// source (package filesource) share. It imports neither, so that watch's own tests can use
// it: a record is any type with watch.ServiceInfo's fields (Record).
package watchtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// Record is the type set of watch.ServiceInfo: a Service's record.
type Record interface {
	~struct {
		Service *v1.Service
		Slices  []*discoveryv1.EndpointSlice
	}
}

// record is what every Record converts to.
type record struct {
	Service *v1.Service
	Slices  []*discoveryv1.EndpointSlice
}

// Describe renders records compactly for comparisons, one line a name, sorted:
// "ns/name -> " and the record's text (DescribeRecord).
func Describe[R Record](m map[types.NamespacedName]*R) []string {
	var out []string
	for k, r := range m {
		out = append(out, k.String()+" -> "+DescribeRecord(r))
	}
	slices.Sort(out)
	return out
}

// DescribeRecord is a record's text: "CLUSTERIP[slice:addr,addr slice2:addr]", or
// "<deleted>" for nil.
func DescribeRecord[R Record](r *R) string {
	if r == nil {
		return "<deleted>"
	}
	rec := record(*r)
	var parts []string
	for _, sl := range rec.Slices {
		var addrs []string
		for _, e := range sl.Endpoints {
			addrs = append(addrs, e.Addresses...)
		}
		parts = append(parts, sl.Name+":"+strings.Join(addrs, ","))
	}
	return fmt.Sprintf("%s[%s]", rec.Service.Spec.ClusterIP, strings.Join(parts, " "))
}

// AssertLines fails t, naming what, when got and want differ (nil and empty are equal).
func AssertLines(t testing.TB, what string, got, want []string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// Recv waits for a receive on c, and fails t, naming what, when none comes within 10 s.
func Recv(t testing.TB, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// ClockWaiting is a poll condition (testutil/poll): a goroutine waits on clk.
func ClockWaiting(clk *clocktesting.FakeClock) func() (bool, string) {
	return func() (bool, string) { return clk.HasWaiters(), "nothing waits on the clock" }
}
