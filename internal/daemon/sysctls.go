package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/ipvs"
	"github.com/kipvs/kipvs/internal/ipvsmode"
	"github.com/kipvs/kipvs/internal/sysctl"
)

// applySysctls sets every desired value, logging each change old -> new. A read-only
// /proc/sys fails with one error naming the key.
func applySysctls(s sysctl.Interface, settings []ipvsmode.Sysctl, log *zap.Logger) error {
	for _, st := range settings {
		old, changed, err := s.Set(st.Key, st.Value)
		if err != nil {
			return fmt.Errorf("sysctl %s=%s (%s): %w", strings.ReplaceAll(st.Key, "/", "."), st.Value, st.Why, err)
		}
		if changed {
			log.Info("set sysctl", zap.String("key", st.Key), zap.String("old", old), zap.String("new", st.Value), zap.String("why", st.Why))
		}
	}
	return nil
}

// setConntrackHashsize raises nf_conntrack's hash table to max/4 buckets (as kube-proxy
// does) when it is smaller; sysfsRoot is normally /sys.
func setConntrackHashsize(sysfsRoot string, max int, log *zap.Logger) error {
	if max <= 0 {
		return nil
	}
	path := filepath.Join(sysfsRoot, "module/nf_conntrack/parameters/hashsize")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nf_conntrack not loaded yet: the kernel sizes it from nf_conntrack_max
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("read %s: %q is not a number", path, b)
	}
	want := max / 4
	if cur >= want {
		return nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0o644); err != nil {
		return fmt.Errorf("set %s to %d: %w", path, want, err)
	}
	log.Info("set conntrack hashsize", zap.Int("old", cur), zap.Int("new", want))
	return nil
}

// ipvsTimeouts converts the configured IPVS timeouts (0 = leave the kernel's).
func ipvsTimeouts(cfg *config.Config) ipvs.Timeouts {
	return ipvs.Timeouts{
		TCP:    uint32(cfg.IPVS.TCPTimeout / time.Second),
		TCPFin: uint32(cfg.IPVS.TCPFinTimeout / time.Second),
		UDP:    uint32(cfg.IPVS.UDPTimeout / time.Second),
	}
}

// readOnlySysEvent returns kube-proxy's Node Event for a conntrack setting that failed
// because /sys is read-only (its reason is its error's text), for err from
// setConntrackHashsize.
func readOnlySysEvent(err error) (reason, message string, ok bool) {
	if !errors.Is(err, syscall.EROFS) {
		return "", "", false
	}
	return "readOnlySysFS", "CRI error: /sys is read-only: " +
		"cannot modify conntrack limits, problems may arise later (If running Docker, see docker issue #24000)", true
}
