package harness

import (
	"os"
	"testing"
)

// LoadProxyEnv is LoadEnv for runs that need the proxies but no echo backend (make
// bench-compare): it reads KIPVS_E2E_KUBECONFIG, KIPVS_BIN and KIPVS_KUBE_PROXY_BIN, fails
// the test outside the VM, and stages kipvs (kube-proxy is staged by RequireKubeProxy).
func LoadProxyEnv(t testing.TB) Env {
	t.Helper()
	e := Env{
		Kubeconfig:   os.Getenv("KIPVS_E2E_KUBECONFIG"),
		KipvsBin:     os.Getenv("KIPVS_BIN"),
		KubeProxyBin: os.Getenv("KIPVS_KUBE_PROXY_BIN"),
	}
	for name, v := range map[string]string{"KIPVS_E2E_KUBECONFIG": e.Kubeconfig, "KIPVS_BIN": e.KipvsBin} {
		if v == "" {
			t.Fatalf("%s is not set: run through make bench-compare", name)
		}
		if _, err := os.Stat(v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if os.Getenv("KIPVS_IN_VM") != "1" {
		t.Fatal("this changes the network configuration of the machine it runs on: run it in the VM (make bench-compare)")
	}
	var err error
	if e.KipvsBin, err = stage(e.KipvsBin, "kipvs"); err != nil {
		t.Fatal(err)
	}
	return e
}

// PID is the process id of the proxy.
func (k *Kipvs) PID() int { return k.cmd.Process.Pid }
