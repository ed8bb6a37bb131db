package debian

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDepends(t *testing.T) {
	for field, want := range map[string][]string{
		"": nil,
		"libc6 (>= 2.34), libmnl0 (>= 1.0.3-4~), netbase":   {"libc6", "libmnl0", "netbase"},
		"debconf (>= 0.5) | debconf-2.0, perl:any":          {"debconf", "perl"},
		"libxtables12 (= 1.8.9-2),\n libnftnl11 (>= 1.2.2)": {"libxtables12", "libnftnl11"},
	} {
		if diff := cmp.Diff(want, ParseDepends(field)); diff != "" {
			t.Errorf("ParseDepends(%q) (-want +got):\n%s", field, diff)
		}
	}
}

func TestParseControl(t *testing.T) {
	got := ParseControl([]byte("Package: iptables\nVersion: 1:1.8.9-2\nDepends: libc6 (>= 2.34),\n libmnl0\nPre-Depends: \n"))
	want := map[string]string{"Package": "iptables", "Version": "1:1.8.9-2", "Depends": "libc6 (>= 2.34),\nlibmnl0", "Pre-Depends": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"libc6", "libmnl0"}, ParseDepends(got["Depends"])); diff != "" {
		t.Errorf("continued Depends (-want +got):\n%s", diff)
	}
}
