package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// The Go profiles TestBenchCompare takes of a profiled proxy (Config.Profiles), in its
// ProfileDir. Each is read from the proxy's /debug/pprof on its metrics server
// (enableProfiling in the KubeProxyConfiguration) and can be read with go tool pprof.
const (
	// ProfileHeapFirstSync is the heap profile once the proxy reports its first sync.
	ProfileHeapFirstSync = "heap-first-sync.pprof"
	// ProfileCPUChanges is a CPU profile from the first change's write over ChangeWindow.
	ProfileCPUChanges = "cpu-changes.pprof"
	// ProfileCPUIdle is a CPU profile over the idle window (periodic full syncs only).
	ProfileCPUIdle = "cpu-idle.pprof"
	// ProfileHeapEnd is the heap profile at the end of the run.
	ProfileHeapEnd = "heap-end.pprof"
)

// ChangeProfileSlack is how long the changes' CPU profile runs after the last change's
// write, for that change to be programmed.
const ChangeProfileSlack = 10 * time.Second

// ProfileDir is where one proxy's profiles at one N go under root: root/NAME-PROXY-N
// (make bench-compare: .cache/bench/profiles/NAME-PROXY-N on the host).
func ProfileDir(root, name, proxy string, n int) string {
	return filepath.Join(root, name+"-"+proxy+"-"+strconv.Itoa(n))
}

// Profiled says whether the run takes proxy's profiles.
func (c Config) Profiled(proxy string) bool {
	return slices.Contains(c.Profiles, proxy)
}

// ChangeWindow is how long the changes' CPU profile runs: from the first change's write to
// the last one's (a fixed schedule), plus ChangeProfileSlack. 0 without changes.
func (c Config) ChangeWindow() time.Duration {
	if c.Changes <= 0 {
		return 0
	}
	return time.Duration(c.Changes-1)*c.Interval + ChangeProfileSlack
}

// ProfileSeconds is the seconds parameter of a CPU profile that covers d: whole seconds,
// rounded up, at least 1.
func ProfileSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// CPUProfileURL is the /debug/pprof URL of a CPU profile over d from a server at addr
// (host:port).
func CPUProfileURL(addr string, d time.Duration) string {
	return fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, ProfileSeconds(d))
}

// HeapProfileURL is the /debug/pprof URL of the heap profile of a server at addr.
func HeapProfileURL(addr string) string {
	return "http://" + addr + "/debug/pprof/heap"
}

// FetchProfile GETs url and writes the body (a profile) to path, creating its directory. A
// status other than 200 is an error, and nothing is written.
func FetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("bench: profile %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("bench: profile %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: profile %s: %s: %.200s", url, resp.Status, body)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return fmt.Errorf("bench: profile: %w", err)
	}
	return nil
}
