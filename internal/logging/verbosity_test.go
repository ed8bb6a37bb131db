package logging

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// SetVerbosity changes -v for the logger and every logger derived from it (Named, With),
// as kube-proxy's PUT /debug/flags/v; a value that is not a level is refused and changes
// nothing.
func TestSetVerbosity(t *testing.T) {
	var buf bytes.Buffer
	log := zap.New(&core{enc: jsonEncoder(), out: zapcore.AddSync(&buf), gate: newGate(0, nil)})
	child := log.Named("sync").With(zap.String("family", "IPv4"))
	child.Debug("before")
	if _, err := SetVerbosity(log, "four"); err == nil {
		t.Error(`SetVerbosity("four") succeeded`)
	}
	child.Debug("refused")
	msg, err := SetVerbosity(log, "4")
	if err != nil || msg != "successfully set klog.logging.verbosity to 4" {
		t.Fatalf("SetVerbosity(4) = %q, %v", msg, err)
	}
	child.Debug("after")
	if _, err := SetVerbosity(log, "0"); err != nil {
		t.Fatal(err)
	}
	child.Debug("back")
	if got := buf.String(); strings.Contains(got, "before") || strings.Contains(got, "refused") || !strings.Contains(got, `"msg":"after"`) || strings.Contains(got, "back") {
		t.Errorf("written:\n%s\nwant only the line logged at -v=4", got)
	}
	if _, err := SetVerbosity(zap.NewNop(), "4"); err == nil {
		t.Error("SetVerbosity on a logger New did not make succeeded")
	}
}
