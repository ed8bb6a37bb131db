package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// jsonEnc writes component-base's JSON log lines (kube-proxy --logging-format=json):
// {"ts":<Unix milliseconds, float>,"logger":...,"caller":"dir/file.go:N","msg":...,"v":N,
// <fields>...}, with "v" on every line below Error and a line's error last, as "err".
type jsonEnc struct{ zapcore.Encoder }

func jsonEncoder() encoder {
	return jsonEnc{zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		MessageKey:     "msg",
		CallerKey:      "caller",
		NameKey:        "logger",
		TimeKey:        "ts",
		EncodeTime:     epochMillis,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	})}
}

func epochMillis(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendFloat64(float64(t.UnixNano()) / float64(time.Millisecond))
}

func (j jsonEnc) encode(e zapcore.Entry, ctx, fields []zapcore.Field) (*buffer.Buffer, error) {
	enc := j.Clone()
	for _, f := range ctx {
		f.AddTo(enc)
	}
	line := make([]zapcore.Field, 0, len(fields)+1)
	if e.Level < zapcore.ErrorLevel {
		line = append(line, zap.Int("v", verbosityOf(e.Level)))
	}
	return enc.EncodeEntry(e, append(line, errorsMoved(fields, false)...))
}

// textEncoder writes klog's text log lines (kube-proxy's default format):
// Lmmdd hh:mm:ss.uuuuuu PID file.go:N] "msg" key="value" key=123 ...
// with L the severity (I, W, E, F), a line's error first, as err=, then logger="name".
type textEncoder struct {
	pid  int
	pool buffer.Pool
}

func (t textEncoder) encode(e zapcore.Entry, ctx, fields []zapcore.Field) (*buffer.Buffer, error) {
	b := t.pool.Get()
	sev := 'I'
	switch {
	case e.Level >= zapcore.FatalLevel:
		sev = 'F'
	case e.Level >= zapcore.ErrorLevel:
		sev = 'E'
	case e.Level == zapcore.WarnLevel:
		sev = 'W'
	}
	file, line := "???", 1
	if e.Caller.Defined {
		file, line = filepath.Base(e.Caller.File), e.Caller.Line
	}
	_, month, day := e.Time.Date()
	hour, minute, second := e.Time.Clock()
	fmt.Fprintf(b, "%c%02d%02d %02d:%02d:%02d.%06d %7d %s:%d] ", sev, int(month), day, hour, minute, second,
		e.Time.Nanosecond()/1000, t.pid, file, line)
	b.AppendString(strconv.Quote(e.Message))
	all := append(slices.Clip(ctx), fields...)
	errs := 0
	if e.Level >= zapcore.ErrorLevel {
		all = errorsMoved(all, true)
		for errs < len(all) && all[errs].Key == errorKey && all[errs].Type == zapcore.ErrorType {
			errs++
		}
	}
	for _, f := range all[:errs] {
		appendField(b, f)
	}
	if e.LoggerName != "" {
		b.AppendString(" logger=")
		b.AppendString(strconv.Quote(e.LoggerName))
	}
	for _, f := range all[errs:] {
		appendField(b, f)
	}
	b.AppendByte('\n')
	return b, nil
}

// appendField writes f as klog does a key and value: " key=value" (several for a field zap
// encodes as several keys, such as an error with a verbose form).
func appendField(b *buffer.Buffer, f zapcore.Field) {
	m := zapcore.NewMapObjectEncoder()
	f.AddTo(m)
	keys := make([]string, 0, len(m.Fields))
	for k := range m.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.AppendByte(' ')
		b.AppendString(k)
		b.AppendByte('=')
		appendValue(b, m.Fields[k])
	}
}

// appendValue writes v as klog's text format does: strings, Stringers (durations, times)
// and errors quoted, or as an indented block when they hold line breaks; byte slices %+q;
// anything else as JSON.
func appendValue(b *buffer.Buffer, v any) {
	switch v := v.(type) {
	case fmt.Stringer:
		appendString(b, safeString(v.String))
	case string:
		appendString(b, v)
	case error:
		appendString(b, safeString(v.Error))
	case []byte:
		fmt.Fprintf(b, "%+q", v)
	default:
		var j bytes.Buffer
		if err := json.NewEncoder(&j).Encode(v); err != nil {
			fmt.Fprintf(b, `"<internal error: %v>"`, err)
			return
		}
		_, _ = b.Write(bytes.TrimSuffix(j.Bytes(), []byte("\n")))
	}
}

// safeString returns f(), or the panic it raised, as klog does.
func safeString(f func() string) (s string) {
	defer func() {
		if err := recover(); err != nil {
			s = fmt.Sprintf("<panic: %s>", err)
		}
	}()
	return f()
}

// appendString writes s quoted, or, when it holds a line break, as klog's block:
// <, each line indented by a tab, and > on a line of its own, indented by a space.
func appendString(b *buffer.Buffer, s string) {
	if !strings.Contains(s, "\n") {
		b.AppendString(strconv.Quote(s))
		return
	}
	b.AppendString("<\n")
	for line := range strings.Lines(s) {
		b.AppendByte('\t')
		b.AppendString(line)
	}
	if !strings.HasSuffix(s, "\n") {
		b.AppendByte('\n')
	}
	b.AppendString(" >")
}
