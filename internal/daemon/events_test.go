package daemon

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The apiserver rejects an Event whose note is over 1024 characters (the seed-001 Node
// Warning was lost that way); fitNote keeps notes within it without splitting a rune.
func TestFitNote(t *testing.T) {
	for _, msg := range []string{
		"short",
		strings.Repeat("a", maxNote),
		strings.Repeat("a", maxNote+1),
		strings.Repeat("é", maxNote),
		strings.Repeat("x", 1020) + "日本語",
	} {
		got := fitNote(msg)
		if len(got) > maxNote || !utf8.ValidString(got) {
			t.Errorf("fitNote(%d bytes) = %d bytes, valid UTF-8 %v", len(msg), len(got), utf8.ValidString(got))
		}
		if len(msg) <= maxNote && got != msg {
			t.Errorf("fitNote changed a note of %d bytes", len(msg))
		}
		if len(msg) > maxNote && !strings.HasSuffix(got, "...") {
			t.Errorf("a cut note does not end in ...: %q", got[len(got)-10:])
		}
	}
}
