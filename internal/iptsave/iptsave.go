// Package iptsave holds the one fact about iptables-save's output that both the pure proxy
// layer (which renders rules) and the netfilter adapter (which checks them for canonical
// form) need: how a string option such as a comment is quoted. It imports nothing of kipvs.
package iptsave

import "strings"

// Quote renders s exactly as iptables-save prints a string option such as a comment
// (xtables_save_string): bare when it is made only of letters, digits, '_' and '-',
// otherwise in double quotes with every double quote, backslash and single quote escaped by
// a backslash. Upstream's SCTP set comments contain single quotes, printed as \'.
func Quote(s string) string {
	bare := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			bare = false
			break
		}
	}
	if bare {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		if c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	b.WriteByte('"')
	return b.String()
}
