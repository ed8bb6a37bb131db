package proxy

import (
	"testing"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/netfilter"
)

// quoteComment must print a comment exactly as iptables-save does (xtables_save_string): bare
// when made only of letters, digits, underscores and dashes, otherwise in double quotes with
// every double quote, backslash and single quote escaped by a backslash. Checked against
// iptables 1.8.9, nft and legacy.
func TestQuoteComment(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"KUBE-NODE-PORT", "KUBE-NODE-PORT"},
		{"under_score-9", "under_score-9"},
		{"", `""`},
		{"kubernetes service portals", `"kubernetes service portals"`},
		{"a.b", `"a.b"`},
		{"ip:port", `"ip:port"`},
		{"x=y+z/1", `"x=y+z/1"`},
		{"a+b=c,d/e:f", `"a+b=c,d/e:f"`},
		{"has space", `"has space"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
		{"it's", `"it\'s"`},
		{"Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
			`"Kubernetes nodeport SCTP port for masquerade purpose with type \'hash ip:port\'"`},
		{"Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
			`"Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type \'hash ip:port\'"`},
	} {
		if got := quoteComment(tc.in); got != tc.want {
			t.Errorf("quoteComment(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if nf := netfilter.Quote(tc.in); nf != tc.want {
			t.Errorf("netfilter.Quote(%q) = %s, want %s (the two must agree)", tc.in, nf, tc.want)
		}
	}
}

// The set comments stay upstream kube-proxy's text, single quotes included.
func TestSetCommentsAreUpstreams(t *testing.T) {
	want := map[string]string{
		SetNodePortSCTP:      "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'",
		SetNodePortLocalSCTP: "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
	}
	for _, s := range Sets(inet.IPv4) {
		if w, ok := want[s.Base]; ok && s.Comment != w {
			t.Errorf("set %s comment %q, want upstream's %q", s.Name, s.Comment, w)
		}
	}
}
