package deploy_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kipvs/kipvs/internal/config"
)

// unitFile reads a systemd unit into section -> key -> values (keys may repeat).
func unitFile(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("%s: malformed line %q", path, l)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMakeInstall runs `make install` into a temporary DESTDIR (never the machine's own
// /etc) with PREFIX=/usr and checks what lands where: the binary, the unit pointing at it
// and at the environment file, and an environment file that a second install leaves alone.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kipvs")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	dest := t.TempDir()
	build := t.TempDir()
	install := func() string {
		t.Helper()
		cmd := exec.Command("make", "-s", "-C", "..", "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+build)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
		return string(out)
	}
	install()

	bin := filepath.Join(dest, "usr", "bin", "kipvs")
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
		t.Fatalf("installed %s does not run: %v\n%s", bin, err, out)
	}
	unitPath := filepath.Join(dest, "usr", "lib", "systemd", "system", "kipvs.service")
	envPath := filepath.Join(dest, "etc", "default", "kipvs")
	for _, p := range []string{unitPath, envPath} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644", p, st.Mode().Perm())
		}
	}

	unit := unitFile(t, unitPath)
	svc := unit["Service"]
	if got := svc["EnvironmentFile"]; len(got) != 1 || got[0] != "-/etc/default/kipvs" {
		t.Errorf("EnvironmentFile = %q, want -/etc/default/kipvs (optional)", got)
	}
	if got := unit["Unit"]["Conflicts"]; len(got) != 1 || got[0] != "kube-proxy.service" {
		t.Errorf("Conflicts = %q, want kube-proxy.service", got)
	}
	if got := unit["Install"]["WantedBy"]; len(got) != 1 || got[0] != "multi-user.target" {
		t.Errorf("WantedBy = %q", got)
	}
	// The sandbox (issue 23): what kipvs needs and nothing more (docs/security.md).
	for key, want := range map[string]string{
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "CAP_NET_ADMIN CAP_NET_RAW CAP_SYS_RESOURCE",
		"ProtectSystem":           "strict",
		"ReadWritePaths":          "/run/xtables.lock",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"RestrictAddressFamilies": "AF_NETLINK AF_UNIX AF_INET AF_INET6",
	} {
		if got := svc[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	exe := svc["ExecStart"]
	if len(exe) != 1 {
		t.Fatalf("ExecStart = %q", exe)
	}
	fields := strings.Fields(exe[0])
	if len(fields) < 3 || fields[0] != "/usr/bin/kipvs" || fields[1] != "run" {
		t.Fatalf("ExecStart %q does not run /usr/bin/kipvs run", exe[0])
	}
	var flags []string
	for _, f := range fields[2:] {
		switch {
		case f == "$KIPVS_ARGS":
		case strings.Contains(f, "@"), strings.Contains(f, "$"):
			t.Errorf("ExecStart %q: %q is left unexpanded", exe[0], f)
		default:
			flags = append(flags, f)
		}
	}
	if !strings.Contains(exe[0], "--config=/etc/kubernetes/kube-proxy-config.yaml") {
		t.Errorf("ExecStart %q does not read /etc/kubernetes/kube-proxy-config.yaml", exe[0])
	}
	fs := pflag.NewFlagSet("kipvs run", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	config.AddFlags(fs)
	if err := fs.Parse(flags); err != nil {
		t.Errorf("ExecStart flags %q: %v", flags, err)
	}

	// The environment file: NAME=VALUE lines, KIPVS_ARGS among them.
	env, err := os.ReadFile(envPath)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, l := range strings.Split(string(env), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			t.Errorf("environment file line %q is not NAME=VALUE", l)
		}
		names[k] = true
	}
	if !names["KIPVS_ARGS"] {
		t.Error("the environment file does not set KIPVS_ARGS")
	}

	// A second install keeps the administrator's environment file.
	const mine = "KIPVS_ARGS=--hostname-override=node-7\n"
	if err := os.WriteFile(envPath, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	out := install()
	if got, _ := os.ReadFile(envPath); string(got) != mine {
		t.Errorf("a second make install replaced the environment file with %q (output %s)", got, out)
	}
}
