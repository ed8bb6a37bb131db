package config

import (
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one bad setting. Every error Load, Parse and Validate return is a FieldError
// or an errors.Join of them (possibly wrapped with the file name), so callers can list them
// with errors.As.
type FieldError struct {
	// Field is the path of the setting in a KubeProxyConfiguration file, such as
	// "ipvs.syncPeriod"; "" for settings that exist only as flags.
	Field string
	// Flag is the command-line flag of the setting, such as "--ipvs-sync-period"; "" for
	// settings that exist only in the file, or when the error is about the file's text.
	Flag string
	// Value is the offending value as written (strings without quotes).
	Value string
	// Detail says what is wrong and, where it helps, what would be right.
	Detail string
	// Err is the underlying error, if any.
	Err error
}

func (e *FieldError) Error() string {
	var where string
	switch {
	case e.Field != "" && e.Flag != "":
		where = e.Field + " (" + e.Flag + ")"
	case e.Field != "":
		where = e.Field
	default:
		where = e.Flag
	}
	return fmt.Sprintf("%s: %s: %s", where, quoteValue(e.Value), e.Detail)
}

// quoteValue quotes a value for a message; values holding double quotes (JSON objects and
// lists) are shown between back quotes, unescaped.
func quoteValue(v string) string {
	if strings.Contains(v, `"`) && !strings.ContainsAny(v, "`\n") {
		return "`" + v + "`"
	}
	return strconv.Quote(v)
}

func (e *FieldError) Unwrap() error { return e.Err }

// setting names one configurable value: its file path and its flag, separated by one
// space ("ipvs.syncPeriod --ipvs-sync-period"); either part may be empty. The settings
// table gives each entry's (entry.setting, settingNamed).
type setting string

func (s setting) field() string { f, _, _ := strings.Cut(string(s), " "); return f }
func (s setting) flag() string  { _, f, _ := strings.Cut(string(s), " "); return f }

func (s setting) invalid(value, format string, args ...any) *FieldError {
	return &FieldError{Field: s.field(), Flag: s.flag(), Value: value, Detail: fmt.Sprintf(format, args...)}
}

func (s setting) wrap(value string, err error, format string, args ...any) *FieldError {
	fe := s.invalid(value, format, args...)
	fe.Err = err
	return fe
}

// fieldOnly is the setting as written in a file: the flag is not named, since the value
// came from the file.
func (s setting) fieldOnly() setting { return setting(s.field() + " ") }

// quoteList renders a list of values for an error detail.
func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
