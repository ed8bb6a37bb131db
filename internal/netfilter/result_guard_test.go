package netfilter

import (
	"testing"

	"github.com/kipvs/kipvs/internal/testutil/fieldguard"
)

// Result.Changed decides whether an apply wrote anything.
func TestResultChangedGuard(t *testing.T) {
	full := Result{Restored: []Table{TableNAT}, Payloads: map[Table]string{TableNAT: "*nat\nCOMMIT\n"}}
	ignored := map[string]string{"Payloads": "the input of the tables in Restored; never set without them"}
	fieldguard.CheckPresence(t, full, ignored, func(r Result) bool { return !r.Changed() })
}
