package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/logging"
)

// testdata/kube-proxy-v1.34.10.{text,json}.log are the first lines of kube-proxy v1.34.10
// (make's .cache/k8s/kube-proxy) on a host without IPVS or a cluster, with -v=2 and
// --logging-format=text or json, started twice (the FLAG: lines left out):
//
//	kube-proxy --config c.yaml -v=2 --logging-format=F   (c.yaml: mode ipvs, an unknown field, a missing kubeconfig)
//	kube-proxy --proxy-mode=ipvs --hostname-override=node1 --master=http://127.0.0.1:1 -v=2 --logging-format=F

// klogHeader is klog's text header: severity, MMDD hh:mm:ss.uuuuuu, the pid right-aligned
// in 7 columns, file:line.
var klogHeader = regexp.MustCompile(`^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ([ \d]{7}) ([^ /:]+\.go):(\d+)\] (.*)$`)

// klogStructured is a structured line's body: the quoted message and key=value pairs, a
// value quoted or a bare JSON scalar.
var klogStructured = regexp.MustCompile(`^"(?:[^"\\]|\\.)*"(?: [A-Za-z][A-Za-z0-9_.]*=(?:"(?:[^"\\]|\\.)*"|[^ "]+))*$`)

// textShape checks one text line and returns its severity and whether it has an err= key.
func textShape(t *testing.T, who, line string, structuredOnly bool) (sev string, hasErr bool) {
	t.Helper()
	m := klogHeader.FindStringSubmatch(line)
	if m == nil {
		t.Errorf("%s: not klog's header: %q", who, line)
		return "", false
	}
	if _, err := strconv.Atoi(strings.TrimSpace(m[8])); err != nil {
		t.Errorf("%s: pid column %q: %q", who, m[8], line)
	}
	body := m[11]
	if !strings.HasPrefix(body, `"`) && !structuredOnly {
		return m[1], false // klog's unstructured lines (Infof)
	}
	if !klogStructured.MatchString(body) {
		t.Errorf("%s: not a klog structured body (\"msg\" key=value...): %q", who, body)
	}
	return m[1], strings.Contains(body, ` err="`)
}

// jsonShape checks one JSON line against component-base's schema and returns whether it is
// an error line (err, no v).
func jsonShape(t *testing.T, who, line string) (isErr bool) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Errorf("%s: not a JSON object: %q", who, line)
		return false
	}
	var keys []string
	vals := map[string]any{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Errorf("%s: %v: %q", who, err, line)
			return false
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s: %v: %q", who, err, line)
			return false
		}
		keys = append(keys, k.(string))
		vals[k.(string)] = v
	}
	// The leading keys, in order: ts, logger (named loggers), caller, msg, v (below Error).
	lead := []string{"ts"}
	if _, ok := vals["logger"]; ok {
		lead = append(lead, "logger")
	}
	lead = append(lead, "caller", "msg")
	_, hasV := vals["v"]
	if hasV {
		lead = append(lead, "v")
	}
	if len(keys) < len(lead) || strings.Join(keys[:len(lead)], ",") != strings.Join(lead, ",") {
		t.Errorf("%s: keys %v, want them to start with %v: %q", who, keys, lead, line)
	}
	ts, ok := vals["ts"].(json.Number)
	if !ok || !regexp.MustCompile(`^1\d{12}(\.\d+)?$`).MatchString(ts.String()) {
		t.Errorf("%s: ts %v is not Unix milliseconds as a float: %q", who, vals["ts"], line)
	}
	if c, ok := vals["caller"].(string); !ok || !regexp.MustCompile(`^[^/ ]+/[^/ ]+\.go:\d+$`).MatchString(c) {
		t.Errorf("%s: caller %v is not dir/file.go:line: %q", who, vals["caller"], line)
	}
	for _, k := range []string{"msg", "logger", "err"} {
		if v, ok := vals[k]; ok {
			if _, ok := v.(string); !ok {
				t.Errorf("%s: %s is %T, want a string: %q", who, k, v, line)
			}
		}
	}
	_, isErr = vals["err"]
	if hasV {
		if n, ok := vals["v"].(json.Number); !ok || !regexp.MustCompile(`^\d+$`).MatchString(n.String()) {
			t.Errorf("%s: v %v is not a verbosity: %q", who, vals["v"], line)
		}
	} else if !isErr {
		t.Errorf("%s: a line without v must be an error line (with err): %q", who, line)
	}
	return isErr
}

// captureStderr returns what f writes to os.Stderr.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	f()
	os.Stderr = saved
	w.Close()
	out := <-read
	r.Close()
	return string(out)
}

// kipvsLines is kipvs's start-up in format (an ignored flag's warning, the write's Info
// line) and an error line and a V(2) line written through its logger.
func kipvsLines(t *testing.T, format string) []string {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := stderrOf(t, "run", "--config", file, "--ipvs-scheduler=lc", "-v=2", "--logging-format="+format,
		"--write-config-to", filepath.Join(dir, "out.yaml"))
	out += captureStderr(t, func() {
		log, err := logging.New(format, 4, "")
		if err != nil {
			t.Fatal(err)
		}
		log.Error("command failed", zap.Error(errors.New(`stat "/nonexistent": no such file`)))
		log.Named("UnhandledError").Error("Failed to watch", zap.String("type", "*v1.Node"), zap.Error(errors.New("refused")))
		log.Debug("synced", zap.Bool("full", true), zap.Int("services", 3), zap.Duration("took", 1500*time.Microsecond))
	})
	return strings.Split(strings.TrimSpace(out), "\n")
}

func kubeProxyLines(t *testing.T, format string) []string {
	// Next to this file: the kernel test binary runs in the VM from another directory.
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "testdata", "kube-proxy-v1.34.10."+format+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// kipvs's text lines have kube-proxy's klog header and structured body, with the same
// severity letters and err= on error lines.
func TestLogShapeTextMatchesKubeProxy(t *testing.T) {
	for _, who := range []string{"kube-proxy", "kipvs"} {
		lines := kubeProxyLines(t, "text")
		if who == "kipvs" {
			lines = kipvsLines(t, "text")
		}
		sevs := map[string]bool{}
		for _, l := range lines {
			sev, hasErr := textShape(t, who, l, who == "kipvs")
			sevs[sev] = true
			if sev == "E" && !hasErr {
				t.Errorf("%s: an error line without err=: %q", who, l)
			}
		}
		if !sevs["I"] || !sevs["E"] {
			t.Errorf("%s: want I and E lines, got %v:\n%s", who, sevs, strings.Join(lines, "\n"))
		}
	}
}

// kipvs's JSON lines have component-base's keys, key order and types (ts float Unix
// milliseconds, caller dir/file.go:N, v on lines below Error, err on error lines).
func TestLogShapeJSONMatchesKubeProxy(t *testing.T) {
	for _, who := range []string{"kube-proxy", "kipvs"} {
		lines := kubeProxyLines(t, "json")
		if who == "kipvs" {
			lines = kipvsLines(t, "json")
		}
		var info, errs int
		for _, l := range lines {
			if who == "kube-proxy" && !strings.HasPrefix(l, "{") {
				continue // kube-proxy writes its config file's decoding notice before its JSON logger exists
			}
			if jsonShape(t, who, l) {
				errs++
			} else {
				info++
			}
		}
		if info == 0 || errs == 0 {
			t.Errorf("%s: want info and error lines, got %d and %d:\n%s", who, info, errs, strings.Join(lines, "\n"))
		}
		if who == "kipvs" && !bytes.Contains([]byte(strings.Join(lines, "\n")), []byte(`"msg":"synced","v":4,`)) {
			t.Errorf("kipvs: want its Debug line at v 4:\n%s", strings.Join(lines, "\n"))
		}
	}
}
