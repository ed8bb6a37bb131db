package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The kube-proxy image's iptables wrapper picks the backend by the rules it documents, keeps
// the choice, and runs the chosen mode's program under the name it was called by. Fakes of
// the {ip,ip6}tables-{nft,legacy}-save programs print the given rule sets; called with
// --probe they say who they are.
func TestIPTablesWrapper(t *testing.T) {
	dash, err := exec.LookPath("dash")
	if err != nil {
		t.Skip("no dash on this machine")
	}
	const hint = "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n"
	const threeRules = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\n-A INPUT -j ACCEPT\n-A INPUT -j ACCEPT\nCOMMIT\n"
	const oneRule = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n"
	for _, tc := range []struct {
		name        string
		nft, legacy string // what iptables-{nft,legacy}-save print
		cached      string // the mode file's content before the call
		call, want  string
	}{
		{name: "empty node", call: "iptables-save", want: "iptables-nft-save"},
		{name: "kubelet's hint in nft", nft: hint, legacy: threeRules, call: "iptables-restore", want: "iptables-nft-restore"},
		{name: "kubelet's hint in legacy", nft: threeRules, legacy: hint, call: "ip6tables", want: "ip6tables-legacy"},
		{name: "more rules in legacy", nft: oneRule, legacy: threeRules, call: "iptables", want: "iptables-legacy"},
		{name: "more rules in nft", nft: threeRules, legacy: oneRule, call: "ip6tables-save", want: "ip6tables-nft-save"},
		{name: "the kept choice", nft: hint, cached: "legacy\n", call: "iptables-save", want: "iptables-legacy-save"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, data string, mode os.FileMode) {
				t.Helper()
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
					t.Fatal(err)
				}
			}
			write("nft.rules", tc.nft, 0o644)
			write("legacy.rules", tc.legacy, 0o644)
			for _, fam := range []string{"iptables", "ip6tables"} {
				for _, m := range []string{"nft", "legacy"} {
					for _, op := range []string{"", "-save", "-restore"} {
						write(fam+"-"+m+op, "#!"+dash+"\nif [ \"$1\" = --probe ]; then echo \"${0##*/}\"; exit 0; fi\n"+
							"[ \"$1\" = -t ] && [ \"$2\" != mangle ] && exit 0\ncat "+filepath.Join(dir, m+".rules")+"\n", 0o755)
					}
				}
			}
			write("iptables-wrapper", iptablesWrapper, 0o755)
			if err := os.Symlink("iptables-wrapper", filepath.Join(dir, tc.call)); err != nil {
				t.Fatal(err)
			}
			modeFile := filepath.Join(dir, "mode")
			if tc.cached != "" {
				write("mode", tc.cached, 0o644)
			}
			cmd := exec.Command(filepath.Join(dir, tc.call), "--probe")
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "IPTABLES_WRAPPER_MODE_FILE=" + modeFile, "IPTABLES_WRAPPER_SBIN=" + dir}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s --probe: %v: %s", tc.call, err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("%s ran %q, want %q", tc.call, got, tc.want)
			}
			kept, err := os.ReadFile(modeFile)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(tc.want, "-"+strings.TrimSpace(string(kept))) {
				t.Errorf("kept mode %q for %s", kept, tc.want)
			}
		})
	}
}
