package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
)

// kpConfig is the file format: kube-proxy's v1alpha1 KubeProxyConfiguration.
type kpConfig = v1alpha1.KubeProxyConfiguration

// entryKind says what kipvs does with a setting of the table.
type entryKind int

const (
	// kindSetting is a setting kipvs reads into its Config and writes back.
	kindSetting entryKind = iota
	// kindInvocation is a flag that says what to do (--config, --cleanup, ...), not how.
	kindInvocation
	// kindIgnored is a kube-proxy setting kipvs accepts but does not act on.
	kindIgnored
	// kindObsolete is a file field older kube-proxy releases had and v1.34 no longer has.
	kindObsolete
	// kindTypeMeta is apiVersion or kind, which name the file format.
	kindTypeMeta
)

func (k entryKind) String() string {
	return [...]string{"setting", "invocation", "ignored", "obsolete", "type"}[k]
}

// entry is one row of the settings table (see table): a command-line flag, a field of the
// configuration file, or both, with everything kipvs does with it.
type entry struct {
	// field is the path of the file field that holds the setting ("ipvs.syncPeriod"); ""
	// for a flag without one. Several flags may name one field (--healthz-port and
	// --healthz-bind-address); only one of them reads it.
	field string
	// flag is the flag's name without dashes; "" for a field without one.
	flag string
	help string
	kind entryKind
	// withConfig: kube-proxy still applies the flag when --config is given.
	withConfig bool
	// portFlag: one of the deprecated port flags kube-proxy ignores with --write-config-to.
	portFlag bool
	// reason is why kipvs accepts the setting but does not act on it ("" when it does);
	// flagReason is the same for the flag, when it has to say it differently.
	reason, flagReason string
	// sample is a valid value other than the default, as given to the flag (or, without a
	// flag, to the field); fileSample is the field's value as YAML when it differs.
	sample, fileSample string

	// register adds the flag to fs, with its default from d, and returns what applies the
	// value given on the command line (nil: the flag is applied by another entry's func).
	register func(fs *pflag.FlagSet, e *entry, d *Config) func(*flagRun)
	// ignoredSyntax checks the value of a flag given but not applied because of --config
	// the way kube-proxy's flag parser does, which sees it anyway.
	ignoredSyntax func(s setting, value string) error
	// read sets the Config from the file; s is the setting, named as in a file.
	read func(r *fileRun, s setting)
	// write sets the file field from the Config, for --write-config-to and /configz; nil
	// leaves kube-proxy's default.
	write func(c *Config, kp *kpConfig)
	// unused is the field's value, for a setting kipvs does not act on: a file that sets
	// it to something other than zero or kube-proxy's default gets a notice.
	unused func(kp *kpConfig) any
	// target returns the Config fields the setting sets (for tests).
	target func(c *Config) []any
}

// setting names the entry in errors: its file field and its flag.
func (e *entry) setting() setting {
	if e.flag == "" {
		return setting(e.field + " ")
	}
	return setting(e.field + " " + dashed(e.flag))
}

// dashed is a flag name as written on the command line: "-v", "--ipvs-sync-period".
func dashed(flag string) string {
	if len(flag) == 1 {
		return "-" + flag
	}
	return "--" + flag
}

// flagNotice is the reason given in the notice for the flag, when it is applied.
func (e *entry) flagNotice() string {
	if e.flagReason != "" {
		return e.flagReason
	}
	return e.reason
}

// table returns kube-proxy's and kipvs's settings: every flag AddFlags registers, every
// field of a KubeProxyConfiguration and the obsolete fields kipvs knows, each once. Flags
// are applied, and the file read, in this order (errors are reported in it).
func table() []entry {
	var out []entry
	for _, section := range [][]entry{
		invocationEntries(), apiEntries(), nodeEntries(), proxyEntries(), ipvsEntries(),
		conntrackEntries(), localEntries(), loggingEntries(), ignoredEntries(), ignoredLoggingEntries(),
		documentEntries(), kipvsEntries(),
	} {
		out = append(out, section...)
	}
	return out
}

// settingNamed returns the setting of the entry whose flag, or (for a field without a
// flag) field, is name. It panics on a name the table does not have: a programming error.
func settingNamed(name string) setting { return settingsByName()(name) }

// settingsByName returns settingNamed for many look-ups, with the table built once.
func settingsByName() func(name string) setting {
	byName := map[string]setting{}
	for _, e := range table() {
		name := e.flag
		if name == "" {
			name = e.field
		}
		byName[name] = e.setting()
	}
	return func(name string) setting {
		s, ok := byName[name]
		if !ok {
			panic(fmt.Sprintf("config: no setting named %q", name))
		}
		return s
	}
}

// Setting describes one entry of the settings table, for tests and documentation.
type Setting struct {
	// Field is the path of the file field ("ipvs.syncPeriod"); "" for a flag without one.
	Field string
	// Flag is the flag's name without dashes ("ipvs-sync-period"); "" for a field without one.
	Flag string
	// Kind is "setting", "invocation", "ignored" (accepted, not acted on), "obsolete" (a
	// field older kube-proxy releases had) or "type" (apiVersion, kind).
	Kind string
	// ReadsField: this entry reads Field from the file (false when another entry does).
	ReadsField bool
	// AppliesWithConfig: kube-proxy applies the flag when --config is given too.
	AppliesWithConfig bool
	// Reason is why kipvs does not act on the setting ("" when it does).
	Reason string
	// Sample is a valid value other than the default, as given to the flag ("" when there
	// is none to try, as for --config); FileSample is the field's value as YAML.
	Sample, FileSample string
}

// Settings returns the settings table: every flag and configuration file field kipvs knows.
func Settings() []Setting {
	t := table()
	out := make([]Setting, len(t))
	for i, e := range t {
		s := Setting{Field: e.field, Flag: e.flag, Kind: e.kind.String(), ReadsField: e.read != nil || e.kind != kindSetting,
			AppliesWithConfig: e.withConfig, Reason: e.reason, Sample: e.sample, FileSample: e.fileSample}
		if s.FileSample == "" && s.Field != "" {
			s.FileSample = e.sample
		}
		out[i] = s
	}
	return out
}

// FileSnippet returns the YAML lines that set the field to FileSample ("ipvs:\n  syncPeriod: 17s\n").
func (s Setting) FileSnippet() string {
	var b strings.Builder
	parts := strings.Split(s.Field, ".")
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
		}
	}
	b.WriteString(" " + s.FileSample + "\n")
	return b.String()
}

// findings collects the problems and notices of reading flags or a file.
type findings struct {
	errs    []error
	notices []notice
}

func (f *findings) add(errs ...error) {
	for _, err := range errs {
		if err != nil {
			f.errs = append(f.errs, err)
		}
	}
}

// fileRun is one conversion of a decoded file into a Config.
type fileRun struct {
	kp *kpConfig
	c  *Config
	findings
}

// The generic entries: a Config field of type T bound to a flag of pflag's own type T and
// to a file field of type F.

// flagVarFunc is one of pflag's (*FlagSet).XxxVar methods.
type flagVarFunc[T any] func(fs *pflag.FlagSet, p *T, name string, value T, usage string)

// copyFlag registers the flag with reg, its default the Config's, and copies its value.
func copyFlag[T any](reg flagVarFunc[T], get func(*Config) *T) func(*pflag.FlagSet, *entry, *Config) func(*flagRun) {
	return func(fs *pflag.FlagSet, e *entry, d *Config) func(*flagRun) {
		p := new(T)
		reg(fs, p, e.flag, *get(d), e.help)
		name := e.flag
		return func(r *flagRun) {
			if r.set(name) {
				*get(r.c) = *p
			}
		}
	}
}

// fileField binds a Config field to a file field: from gives the value a file field holds
// and whether it is set (an unset field leaves FileDefaults' value); to renders it.
func fileField[T, F any](e entry, get func(*Config) *T, kp func(*kpConfig) *F, from func(F) (T, bool), to func(T) F) entry {
	e.read = func(r *fileRun, _ setting) {
		if v, ok := from(*kp(r.kp)); ok {
			*get(r.c) = v
		}
	}
	e.write = func(c *Config, k *kpConfig) { *kp(k) = to(*get(c)) }
	if e.target == nil {
		e.target = func(c *Config) []any { return []any{get(c)} }
	}
	return e
}

// both binds a Config field to a flag of pflag's type T and to a file field.
func both[T, F any](e entry, reg flagVarFunc[T], get func(*Config) *T, kp func(*kpConfig) *F, from func(F) (T, bool), to func(T) F) entry {
	e.register = copyFlag(reg, get)
	return fileField(e, get, kp, from, to)
}

// flagOnly binds a Config field to a flag that has no file field.
func flagOnly[T any](e entry, reg flagVarFunc[T], get func(*Config) *T) entry {
	e.register = copyFlag(reg, get)
	e.target = func(c *Config) []any { return []any{get(c)} }
	return e
}

// Conversions between file values and Config values.

func always[T any](v T) (T, bool) { return v, true }

func ifNonZero[T comparable](v T) (T, bool) {
	var zero T
	return v, v != zero
}

func same[T any](v T) T { return v }

func ifSet[T any](p *T) (T, bool) {
	if p == nil {
		var zero T
		return zero, false
	}
	return *p, true
}

func fromDuration(d metav1.Duration) (time.Duration, bool) { return d.Duration, true }

func durationIfNonZero(d metav1.Duration) (time.Duration, bool) { return d.Duration, d.Duration != 0 }

func toDuration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func durationIfSet(p *metav1.Duration) (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	return p.Duration, true
}

func toDurationPtr(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
