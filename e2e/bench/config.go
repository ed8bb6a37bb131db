package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KnownProxies are the proxies TestBenchCompare can run: kube-proxy v1.34.10 in its IPVS,
// nftables and iptables modes (one binary, the mode set in its KubeProxyConfiguration),
// kipvs, and kipvs with its nftables filter backend (kipvs-nftables).
func KnownProxies() []string {
	return []string{"kube-proxy", "kube-proxy-nftables", "kube-proxy-iptables", "kipvs", "kipvs-nftables"}
}

// KipvsArgs are the arguments proxy (kipvs or kipvs-nftables) runs with after `run
// --config FILE`.
func KipvsArgs(proxy string) []string {
	if proxy == "kipvs-nftables" {
		return []string{"--kipvs-filter-backend=nftables"}
	}
	return nil
}

// DefaultProxies are the proxies make bench-compare runs unless told otherwise, in order.
func DefaultProxies() []string { return []string{"kube-proxy", "kipvs"} }

// ProxyMode is the KubeProxyConfiguration mode proxy runs in: "ipvs" for kube-proxy and
// kipvs, "nftables" and "iptables" for kube-proxy-nftables and kube-proxy-iptables.
func ProxyMode(proxy string) string {
	switch proxy {
	case "kube-proxy-nftables":
		return "nftables"
	case "kube-proxy-iptables":
		return "iptables"
	}
	return "ipvs"
}

// IsKubeProxy says whether proxy is kube-proxy in one of its modes.
func IsKubeProxy(proxy string) bool { return strings.HasPrefix(proxy, "kube-proxy") }

// Config is what TestBenchCompare measures, passed into the VM as BENCH_* variables.
type Config struct {
	N, E    int
	Changes int // K endpoint changes
	// Interval separates the changes' writes (a fixed schedule: a slow proxy sees them
	// overlap, as it would in a cluster).
	Interval time.Duration
	// Idle is the window with no change over which idle CPU is measured.
	Idle time.Duration
	// ScrapeEvery, when > 0, adds a second idle window of the same length in which the
	// proxy's /metrics is scraped this often (as Prometheus would), for the CPU a scrape
	// costs: the same run measured unscraped, then scraped.
	ScrapeEvery time.Duration
	// FirstSyncLimit and ChangeLimit bound the wait for the first sync and for one change
	// (a change not seen by then counts as ChangeLimit, and as timed out).
	FirstSyncLimit time.Duration
	ChangeLimit    time.Duration
	// PollInterval separates the first-sync polls (each reads every virtual server);
	// ChangePoll the reads of a changed one.
	PollInterval time.Duration
	ChangePoll   time.Duration
	Proxies      []string
	Seed         uint64
	// VMMemoryMB and Accel describe the VM for the record.
	VMMemoryMB int
	Accel      string
	// Profiles are the proxies whose Go profiles are taken (run with enableProfiling) into
	// ProfileDir(ProfileRoot, Name, proxy, N): see ProfileCPUIdle and the others.
	Profiles    []string
	ProfileRoot string // in the VM
	Name        string // the run's name (make bench-compare's BENCH_NAME)
	// LoadWorkers and LoadDuration are the load generator's concurrent workers and the
	// length of each of its measurements (the data path figures).
	LoadWorkers  int
	LoadDuration time.Duration
}

// DefaultConfig has the defaults of make bench-compare, for one N.
func DefaultConfig(n int) Config {
	return Config{
		N: n, E: 10, Changes: 50,
		Interval: 3 * time.Second, Idle: 60 * time.Second,
		FirstSyncLimit: 30 * time.Minute, ChangeLimit: 5 * time.Minute,
		PollInterval: time.Second, ChangePoll: 20 * time.Millisecond,
		Proxies: DefaultProxies(), Seed: 1,
		VMMemoryMB: 3072, Accel: "tcg",
		LoadWorkers: 4, LoadDuration: 10 * time.Second,
	}
}

// Validate checks the sizes, durations and proxy names.
func (c Config) Validate() error {
	if err := CheckSize(c.N, c.E); err != nil {
		return err
	}
	if c.Changes < 0 {
		return fmt.Errorf("bench: %d changes", c.Changes)
	}
	if c.Changes > c.N {
		return fmt.Errorf("bench: %d changes but %d Services: each pending change needs its own Service", c.Changes, c.N)
	}
	for name, d := range map[string]time.Duration{"interval": c.Interval, "first-sync limit": c.FirstSyncLimit,
		"change limit": c.ChangeLimit, "poll interval": c.PollInterval, "change poll": c.ChangePoll} {
		if d <= 0 {
			return fmt.Errorf("bench: %s %s: want > 0", name, d)
		}
	}
	if c.LoadWorkers < 1 || c.LoadDuration <= 0 {
		return fmt.Errorf("bench: load generator: %d workers for %s: want >= 1 for > 0", c.LoadWorkers, c.LoadDuration)
	}
	if c.Idle < 0 || c.ScrapeEvery < 0 {
		return fmt.Errorf("bench: idle window %s, scrapes every %s", c.Idle, c.ScrapeEvery)
	}
	if len(c.Proxies) == 0 {
		return fmt.Errorf("bench: no proxy to run")
	}
	for _, p := range slices.Concat(c.Proxies, c.Profiles) {
		if !slices.Contains(KnownProxies(), p) {
			return fmt.Errorf("bench: unknown proxy %q (want %s)", p, strings.Join(KnownProxies(), ", "))
		}
	}
	if len(c.Profiles) > 0 && (c.ProfileRoot == "" || c.Name == "" || strings.ContainsRune(c.Name, '/')) {
		return fmt.Errorf("bench: profiles of %s need a profile directory and a name without '/' (have %q, %q)",
			strings.Join(c.Profiles, ", "), c.ProfileRoot, c.Name)
	}
	return nil
}

// Env renders c as the BENCH_* variables ConfigFromEnv reads.
func (c Config) Env() map[string]string {
	return map[string]string{
		"BENCH_N": strconv.Itoa(c.N), "BENCH_E": strconv.Itoa(c.E), "BENCH_CHANGES": strconv.Itoa(c.Changes),
		"BENCH_INTERVAL": c.Interval.String(), "BENCH_IDLE": c.Idle.String(), "BENCH_SCRAPE_EVERY": c.ScrapeEvery.String(),
		"BENCH_FIRST_SYNC_LIMIT": c.FirstSyncLimit.String(), "BENCH_CHANGE_LIMIT": c.ChangeLimit.String(),
		"BENCH_POLL_INTERVAL": c.PollInterval.String(), "BENCH_CHANGE_POLL": c.ChangePoll.String(),
		"BENCH_PROXIES": strings.Join(c.Proxies, ","), "BENCH_SEED": strconv.FormatUint(c.Seed, 10),
		"BENCH_VM_MEMORY_MB": strconv.Itoa(c.VMMemoryMB), "BENCH_VM_ACCEL": c.Accel,
		"BENCH_PROFILES": strings.Join(c.Profiles, ","), "BENCH_PROFILE_ROOT": c.ProfileRoot, "BENCH_NAME": c.Name,
		"BENCH_LOAD_WORKERS": strconv.Itoa(c.LoadWorkers), "BENCH_LOAD_DURATION": c.LoadDuration.String(),
	}
}

// ConfigFromEnv reads what Env wrote; every variable is required but BENCH_PROFILES,
// BENCH_PROFILE_ROOT and BENCH_NAME (no profiles).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	var errs []string
	get := func(name string) string {
		v := getenv(name)
		if v == "" {
			errs = append(errs, name+" is not set")
		}
		return v
	}
	num := func(name string) int {
		v := get(name)
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", name, v, err))
		}
		return n
	}
	dur := func(name string) time.Duration {
		v := get(name)
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", name, v, err))
		}
		return d
	}
	c.N, c.E, c.Changes = num("BENCH_N"), num("BENCH_E"), num("BENCH_CHANGES")
	c.Interval, c.Idle, c.ScrapeEvery = dur("BENCH_INTERVAL"), dur("BENCH_IDLE"), dur("BENCH_SCRAPE_EVERY")
	c.FirstSyncLimit, c.ChangeLimit = dur("BENCH_FIRST_SYNC_LIMIT"), dur("BENCH_CHANGE_LIMIT")
	c.PollInterval, c.ChangePoll = dur("BENCH_POLL_INTERVAL"), dur("BENCH_CHANGE_POLL")
	c.Proxies = ParseProxies(get("BENCH_PROXIES"))
	if v := get("BENCH_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Sprintf("BENCH_SEED=%q: %v", v, err))
		}
		c.Seed = s
	}
	c.VMMemoryMB = num("BENCH_VM_MEMORY_MB")
	c.LoadWorkers, c.LoadDuration = num("BENCH_LOAD_WORKERS"), dur("BENCH_LOAD_DURATION")
	c.Accel = get("BENCH_VM_ACCEL")
	if v := getenv("BENCH_PROFILES"); v != "" {
		c.Profiles = ParseProxies(v)
	}
	c.ProfileRoot, c.Name = getenv("BENCH_PROFILE_ROOT"), getenv("BENCH_NAME")
	if len(errs) > 0 {
		return c, fmt.Errorf("bench: %s", strings.Join(errs, "; "))
	}
	return c, c.Validate()
}

// ParseProxies splits a comma- or space-separated list of proxy names.
func ParseProxies(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// ParseNs parses a list of N ("500 1000 2000", commas allowed), sorted and without
// duplicates: a run loads the smallest first and adds Services for each next one.
func ParseNs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil {
			return nil, fmt.Errorf("bench: N %q: %w", f, err)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: no N in %q", s)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ExtraModules are the kernel modules the VM loads for kube-proxy's nftables and iptables
// modes beyond the e2e VM's defaults (vm.DefaultModules): the nftables expressions
// kube-proxy's nftables rules use (conntrack, NAT, masquerade, numgen, fib, reject, limit,
// hash) and the iptables matches of its iptables rules (statistic, recent, tcp/udp).
func ExtraModules() []string {
	return []string{
		"nft_ct", "nft_nat", "nft_masq", "nft_numgen", "nft_fib_ipv4", "nft_fib_ipv6", "nft_fib_inet",
		"nft_reject_inet", "nft_reject_ipv4", "nft_reject_ipv6", "nft_limit", "nft_hash", "nft_redir", "nft_objref",
		"xt_statistic", "xt_recent", "xt_tcpudp",
	}
}

// LoadgenEnv names the load generator (cmd/loadgen) in the VM's environment; with
// KIPVS_ECHO_BIN (the echo backend) it turns the data path measurement on.
const LoadgenEnv = "KIPVS_BENCH_LOADGEN"
