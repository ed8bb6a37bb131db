package netfilter

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/kipvs/kipvs/internal/inet"
	"github.com/kipvs/kipvs/internal/kerr"
)

// Rule text: a rule is the argument string that follows `-A CHAIN` in iptables-save output.
// iptables-restore splits it on blanks; a double-quoted part may hold blanks and backslash
// escapes. iptables-save prints each rule in one canonical form, and Apply compares the text it
// reads back with the text it was given, so rules must be written in that form (see Canonical).

// Tokenize splits a rule the way iptables-restore does: blanks separate words, a double quote
// opens or closes a quoted part (which may be glued to unquoted text), and inside quotes a
// backslash takes the next character literally.
func Tokenize(rule string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quoted  bool
		escaped bool
	)
	for _, c := range rule {
		switch {
		case quoted && escaped:
			cur.WriteRune(c)
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case quoted && c == '"':
			quoted = false
		case quoted:
			cur.WriteRune(c)
		case c == '"':
			quoted, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\n' || c == '\r' || c == 0:
			return nil, fmt.Errorf("rule %q: control character %q: %w", rule, c, kerr.ErrInvalid)
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("rule %q: unterminated quote: %w", rule, kerr.ErrInvalid)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Quote renders s exactly as iptables-save prints a string option such as a comment
// (xtables_save_string): bare when it is made only of letters, digits, '_' and '-',
// otherwise in double quotes with every double quote, backslash and single quote escaped by
// a backslash. Upstream's SCTP set comments contain single quotes, printed as \'. Use it to
// build comment arguments: `-m comment --comment ` + Quote(c).
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

// isStringOption reports the options whose value iptables-save prints with Quote; every other
// word is printed as is.
func isStringOption(w string) bool {
	return w == "--comment" || w == "--log-prefix" || w == "--nflog-prefix"
}

// Render joins words back into rule text the way iptables-save prints them.
func Render(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if i > 0 && isStringOption(words[i-1]) {
			out[i] = Quote(w)
		} else {
			out[i] = w
		}
	}
	return strings.Join(out, " ")
}

// Target returns the chain or target a rule jumps or goes to (-j/-g), or "".
func Target(words []string) string {
	for i := 0; i+1 < len(words); i++ {
		switch words[i] {
		case "-j", "-g", "--jump", "--goto":
			return words[i+1]
		}
	}
	return ""
}

// ruleTarget is target for rule text; malformed text has no target.
func ruleTarget(rule string) string {
	words, err := Tokenize(rule)
	if err != nil {
		return ""
	}
	return Target(words)
}

// SetNames returns the ipsets a rule matches against (-m set --match-set NAME ...).
func SetNames(words []string) []string {
	var out []string
	for i := 0; i+1 < len(words); i++ {
		if words[i] == "--match-set" {
			out = append(out, words[i+1])
		}
	}
	return out
}

var hexValue = regexp.MustCompile(`^0x(0|[1-9a-f][0-9a-f]*)$`)

// shortOption returns the short form iptables-save prints for a long basic option.
func shortOption(w string) (string, bool) {
	switch w {
	case "--source", "--src":
		return "-s", true
	case "--destination", "--dst":
		return "-d", true
	case "--protocol":
		return "-p", true
	case "--in-interface":
		return "-i", true
	case "--out-interface":
		return "-o", true
	case "--jump":
		return "-j", true
	case "--goto":
		return "-g", true
	case "--match":
		return "-m", true
	case "--fragment":
		return "-f", true
	}
	return "", false
}

// basicRank is the position of a basic match in iptables-save's order, 0 for other words.
func basicRank(w string) int {
	return slices.Index([]string{"-s", "-d", "-i", "-o", "-p", "-f"}, w) + 1
}

// ctstateRank is the position of a conntrack state in iptables-save's order (the state bits'
// order), 0 for an unknown state.
func ctstateRank(s string) int {
	return slices.Index([]string{"INVALID", "NEW", "RELATED", "ESTABLISHED", "UNTRACKED", "SNAT", "DNAT"}, s) + 1
}

func isPortOption(w string) bool {
	return w == "--dport" || w == "--sport" || w == "--destination-port" || w == "--source-port"
}

// protoName is the name iptables-save prints for a protocol number.
func protoName(n string) (string, bool) {
	switch n {
	case "1":
		return "icmp", true
	case "6":
		return "tcp", true
	case "17":
		return "udp", true
	case "58":
		return "ipv6-icmp", true
	case "132":
		return "sctp", true
	}
	return "", false
}

// Canonical reports, as an error wrapping kerr.ErrInvalid, the ways in which rule is not written
// the way iptables-save prints it, for the forms that are easy to get wrong. It is a best-effort
// check: Apply also reads every table back after writing it and fails when the kernel's text
// differs from the desired text. The forms checked (all confirmed against iptables 1.8.9, nft
// and legacy alike):
//
//   - single blanks between words; a --comment value bare only when it is made of letters,
//     digits, '_' and '-', otherwise double-quoted with double quotes, backslashes and single
//     quotes backslash-escaped;
//   - short basic options (-s -d -i -o -p -f -m -j -g), all before the first -m and in that order
//     (`! -s X` is printed first even when written after the matches);
//   - -s/-d as a network with its length (`10.0.0.1/32`, not `10.0.0.1`), host bits clear, of
//     the handle's family;
//   - -p by lower-case name (tcp, not 6 or TCP), and --dport/--sport after `-m tcp` (or udp,
//     sctp): iptables-save adds the implicit protocol match;
//   - the MARK target only as `--set-xmark VALUE/MASK` (--or-mark X is saved as
//     --set-xmark X/X, --xor-mark X as --set-xmark X/0x0, --set-mark X as --set-xmark X/0xffffffff,
//     --and-mark X as --set-xmark 0x0/^X; CONNMARK --set-mark likewise);
//     --mark without a /0xffffffff mask; marks and masks in lower-case hex (0x4000);
//   - REJECT with an explicit --reject-with;
//   - -m ipvs as `--vproto 6 --vaddr 10.96.0.1 --vport 443` (number, bare host, this order);
//   - conntrack states in the kernel's order (RELATED,ESTABLISHED, not ESTABLISHED,RELATED).
func Canonical(family inet.Family, rule string) error {
	words, err := Tokenize(rule)
	if err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("rule %q is not in iptables-save canonical form: %s: %w", rule, fmt.Sprintf(format, args...), kerr.ErrInvalid)
	}
	if got := Render(words); got != rule {
		return bad("iptables-save prints it as %q", got)
	}
	seenMatch := false
	lastBasic, lastIPVS := 0, 0
	module := ""
	tgt := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		next := ""
		if i+1 < len(words) {
			next = words[i+1]
		}
		if isStringOption(w) {
			i++ // the value is free text
			continue
		}
		if short, ok := shortOption(w); ok {
			return bad("use %s instead of %s", short, w)
		}
		if ord := basicRank(w); ord > 0 {
			if seenMatch {
				return bad("%s must come before the first -m", w)
			}
			if ord < lastBasic {
				return bad("basic matches must be in the order -s -d -i -o -p -f")
			}
			lastBasic = ord
		}
		switch w {
		case "-m":
			seenMatch = true
			module = next
		case "-j", "-g":
			seenMatch = true
			tgt = next
			module = ""
		case "-s", "-d":
			p, err := netip.ParsePrefix(next)
			if err != nil {
				return bad("%s %s: want an address with its prefix length, e.g. %s/%d", w, next, next, hostBits(family))
			}
			if p.Masked() != p {
				return bad("%s %s: host bits set, iptables-save prints %s", w, next, p.Masked())
			}
			if (family == inet.IPv6) != p.Addr().Is6() {
				return bad("%s %s: not an %s address", w, next, family)
			}
		case "-p":
			if name, ok := protoName(next); ok {
				return bad("-p %s is printed as -p %s", next, name)
			}
			if next != strings.ToLower(next) {
				return bad("-p %s is printed as -p %s", next, strings.ToLower(next))
			}
		case "--or-mark", "--xor-mark", "--and-mark", "--set-mark":
			return bad("%s is printed as --set-xmark VALUE/MASK (--or-mark X: X/X, --xor-mark X: X/0x0, --set-mark X: X/0xffffffff, --and-mark X: 0x0/^X)", w)
		case "--mark", "--set-xmark":
			val, mask, hasMask := strings.Cut(next, "/")
			if !hexValue.MatchString(val) || hasMask && !hexValue.MatchString(mask) {
				return bad("%s %s: marks and masks are printed in lower-case hex without leading zeros", w, next)
			}
			if w == "--mark" && mask == "0xffffffff" {
				return bad("--mark %s is printed as --mark %s", next, val)
			}
		case "--vproto", "--vaddr", "--vport":
			// -m ipvs prints --vproto (as a number), --vaddr (a host without its /32 or /128),
			// --vport, in that order.
			rank := slices.Index([]string{"--vproto", "--vaddr", "--vport"}, w) + 1
			if rank < lastIPVS {
				return bad("-m ipvs options are printed in the order --vproto --vaddr --vport")
			}
			lastIPVS = rank
			if w == "--vproto" && (next == "" || strings.Trim(next, "0123456789") != "") {
				return bad("--vproto %s is printed as a protocol number (tcp: 6, udp: 17, sctp: 132)", next)
			}
			if p, err := netip.ParsePrefix(next); w == "--vaddr" && err == nil && p.IsSingleIP() {
				return bad("--vaddr %s is printed as %s", next, p.Addr())
			}
		case "--ctstate":
			states := strings.Split(next, ",")
			for j := range states {
				if ctstateRank(states[j]) == 0 {
					return bad("unknown conntrack state %q", states[j])
				}
				if j > 0 && ctstateRank(states[j]) < ctstateRank(states[j-1]) {
					return bad("conntrack states are printed in the order INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT")
				}
			}
		}
		if isPortOption(w) && module != "tcp" && module != "udp" && module != "sctp" && module != "udplite" {
			return bad("%s needs the protocol match written out (-p tcp -m tcp %s ...)", w, w)
		}
	}
	if tgt == "REJECT" && !strings.Contains(rule, "--reject-with") {
		return bad("REJECT is printed with its --reject-with (default %s)", defaultReject(family))
	}
	return nil
}
