package main

import (
	"net/netip"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kipvs/kipvs/internal/config"
)

func parseDoctorFlags(t *testing.T, args ...string) (*pflag.FlagSet, *config.Flags) {
	t.Helper()
	fs := pflag.NewFlagSet("doctor", pflag.ContinueOnError)
	flags := config.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs, flags
}

// doctor takes run's flags, and keeps a clusterCIDR that overlaps --kipvs-service-cidr
// (which run accepts and reports) so its cluster CIDR check can judge it; other bad values
// still fail.
func TestLoadDoctorConfig(t *testing.T) {
	fs, flags := parseDoctorFlags(t, "--cluster-cidr", "10.96.0.0/12", "--kipvs-service-cidr", "10.96.0.0/12", "--ipvs-scheduler", "sh")
	if _, err := config.Load(flags, nil); err != nil {
		t.Fatalf("config.Load refused a clusterCIDR equal to the Service CIDR (kube-proxy runs with it): %v", err)
	}
	cfg, err := loadDoctorConfig(fs, flags)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ClusterCIDRs) != 1 || cfg.ClusterCIDRs[0] != netip.MustParsePrefix("10.96.0.0/12") ||
		len(cfg.Kipvs.ServiceCIDRs) != 1 || cfg.Kipvs.ServiceCIDRs[0] != netip.MustParsePrefix("10.96.0.0/12") || cfg.IPVS.Scheduler != "sh" {
		t.Errorf("config: clusterCIDRs %v serviceCIDRs %v scheduler %q", cfg.ClusterCIDRs, cfg.Kipvs.ServiceCIDRs, cfg.IPVS.Scheduler)
	}
	if !fs.Lookup("kipvs-service-cidr").Changed {
		t.Error("the flag set was left changed")
	}

	for _, args := range [][]string{
		{"--cluster-cidr", "10.96.0.0/12", "--kipvs-service-cidr", "10.96.0.0/12", "--iptables-masquerade-bit", "40"},
		{"--cluster-cidr", "10.244.0.0/16", "--kipvs-service-cidr", "not-a-cidr"},
		{"--ipvs-sync-period", "-1s"},
	} {
		fs, flags := parseDoctorFlags(t, args...)
		if _, err := loadDoctorConfig(fs, flags); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}

	fs, flags = parseDoctorFlags(t, "--cluster-cidr", "10.244.0.0/16", "--kipvs-service-cidr", "10.96.0.0/12")
	cfg, err = loadDoctorConfig(fs, flags)
	if err != nil || len(cfg.Kipvs.ServiceCIDRs) != 1 {
		t.Errorf("valid flags: %v %v", cfg.Kipvs.ServiceCIDRs, err)
	}
}

func TestDaemonAddress(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:10249": "127.0.0.1:10249",
		"0.0.0.0:10249":   "127.0.0.1:10249",
		"[::]:10249":      "[::1]:10249",
		"10.0.0.5:9999":   "10.0.0.5:9999",
	} {
		if got := daemonAddress(netip.MustParseAddrPort(in)); got != want {
			t.Errorf("daemonAddress(%s) = %s, want %s", in, got, want)
		}
	}
}
