package bench

import (
	"slices"
	"testing"
)

func TestFirstSyncLogLines(t *testing.T) {
	log := `2026-11-29T01:00:00Z	INFO	starting kipvs	{"version": "x"}
2026-11-29T01:00:00Z	INFO	IPVS present	{"version": "1.2.1"}
2026-11-29T01:00:01Z	INFO	waiting for the Service source to sync
2026-11-29T01:00:11Z	INFO	watch caches synced
2026-11-29T01:02:00Z	INFO	full sync applied changes	{"family": "IPv4", "changes": 9, "build": "2s", "apply": "100s"}
2026-11-29T01:02:01Z	INFO	full sync applied changes	{"family": "IPv6", "changes": 1, "build": "0s", "apply": "1s"}
2026-11-29T01:04:00Z	INFO	full sync applied changes	{"family": "IPv4", "changes": 1, "services": 3}
2026-11-29T01:09:00Z	INFO	full sync applied changes	{"family": "IPv4", "changes": 2, "build": "2s", "apply": "9s"}
`
	got := FirstSyncLogLines(log)
	want := []string{
		`2026-11-29T01:00:00Z	INFO	starting kipvs	{"version": "x"}`,
		`2026-11-29T01:00:01Z	INFO	waiting for the Service source to sync`,
		`2026-11-29T01:00:11Z	INFO	watch caches synced`,
		`2026-11-29T01:02:00Z	INFO	full sync applied changes	{"family": "IPv4", "changes": 9, "build": "2s", "apply": "100s"}`,
		`2026-11-29T01:02:01Z	INFO	full sync applied changes	{"family": "IPv6", "changes": 1, "build": "0s", "apply": "1s"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
