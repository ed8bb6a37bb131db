package nft

import (
	"reflect"
	"testing"
)

// nft 1.0.6's `nft --json list table` of a table with an interval set of concatenations (a
// host and a prefix as the last field), a port set, an address-protocol-port set, an empty
// set, an element with a comment, a range and a map (skipped).
const listing = `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
{"table": {"family": "ip", "name": "t", "handle": 1}},
{"set": {"family": "ip", "name": "s", "table": "t", "type": ["ipv4_addr", "inet_proto", "inet_service", "ipv4_addr"], "handle": 1, "flags": ["interval"],
  "elem": [{"concat": ["203.0.113.71", "tcp", 80, "192.168.100.2"]}, {"concat": ["203.0.113.71", "tcp", 80, {"prefix": {"addr": "10.0.0.0", "len": 8}}]}]}},
{"set": {"family": "ip", "name": "p", "table": "t", "type": "inet_service", "handle": 2, "elem": [30080]}},
{"set": {"family": "ip", "name": "c", "table": "t", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 3,
  "elem": [{"concat": ["10.96.0.2", "sctp", 80]}, {"elem": {"val": {"concat": ["10.96.0.1", "tcp", 443]}, "comment": "x"}}]}},
{"set": {"family": "ip", "name": "empty", "table": "t", "type": "ipv4_addr", "handle": 4}},
{"set": {"family": "ip", "name": "r", "table": "t", "type": "ipv4_addr", "handle": 5, "flags": ["interval"], "elem": [{"range": ["10.0.0.1", "10.0.0.5"]}]}},
{"map": {"family": "ip", "name": "m", "table": "t", "type": "ipv4_addr", "map": "verdict", "handle": 6, "elem": [["10.0.0.1", {"accept": null}]]}},
{"chain": {"family": "ip", "table": "t", "name": "c", "handle": 7}}]}`

func TestParseSetElements(t *testing.T) {
	got, err := ParseSetElements([]byte(listing))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][][]string{}
	for name, els := range got {
		keys[name] = [][]string{}
		for _, e := range els {
			if e.Set != name {
				t.Errorf("element %v of set %s names set %q", e.Key, name, e.Set)
			}
			keys[name] = append(keys[name], e.Key)
		}
	}
	want := map[string][][]string{
		"s":     {{"203.0.113.71", "tcp", "80", "192.168.100.2"}, {"203.0.113.71", "tcp", "80", "10.0.0.0/8"}},
		"p":     {{"30080"}},
		"c":     {{"10.96.0.2", "sctp", "80"}, {"10.96.0.1", "tcp", "443"}},
		"empty": {},
		"r":     {{"10.0.0.1-10.0.0.5"}},
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("ParseSetElements:\n got %v\nwant %v", keys, want)
	}
}

func TestParseSetElementsRefusesWhatItCannotRead(t *testing.T) {
	for _, bad := range []string{
		`not json`,
		`{"nftables": [{"set": {"name": "s", "elem": [true]}}]}`,
		`{"nftables": [{"set": {"name": "s", "elem": [{"concat": ["10.0.0.1", {"prefix": {"addr": "10.0.0.0"}}]}]}}]}`,
	} {
		if got, err := ParseSetElements([]byte(bad)); err == nil {
			t.Errorf("ParseSetElements(%s) = %v, want an error", bad, got)
		}
	}
}
