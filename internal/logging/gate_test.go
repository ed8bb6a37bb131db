package logging

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

// -v and --vmodule decide which V levels are written, per source file, as klog does: the
// first matching pattern counts, never below -v; kipvs's Debug is V(DebugV) and the klog
// bridge's V(1) is not kipvs's Debug.
func TestGateVerbosityAndVModule(t *testing.T) {
	mods, err := parseVModule("sync=4,sy*=2,store=0")
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(1, mods)
	klogV := func(n int) zapcore.Level { return klogLevel(zapcore.Level(-n)) }
	for _, tc := range []struct {
		level zapcore.Level
		file  string
		want  bool
	}{
		{zapcore.InfoLevel, "/x/other.go", true},
		{zapcore.WarnLevel, "/x/other.go", true},
		{klogV(1), "/x/other.go", true},
		{klogV(2), "/x/other.go", false},
		{zapcore.DebugLevel, "/x/other.go", false},
		{zapcore.DebugLevel, "/x/sync.go", true},
		{klogV(4), "/x/sync.go", true},
		{klogV(5), "/x/sync.go", false},
		{klogV(2), "/x/syncer.go", true},
		{zapcore.DebugLevel, "/x/syncer.go", false},
		{klogV(1), "/x/store.go", true},
	} {
		if got := g.allows(tc.level, tc.file); got != tc.want {
			t.Errorf("level %d (V%d) in %s: allowed %v, want %v", tc.level, verbosityOf(tc.level), tc.file, got, tc.want)
		}
	}
	if !g.enabled(zapcore.DebugLevel) || g.enabled(klogV(5)) {
		t.Errorf("enabled: Debug %v (want true, sync=4), V5 %v (want false)", g.enabled(zapcore.DebugLevel), g.enabled(klogV(5)))
	}
	for _, bad := range []string{"sync", "sync=x", "=2", "sync=-1", "[=2"} {
		if CheckVModule(bad) == nil {
			t.Errorf("vmodule %q accepted", bad)
		}
	}
}
