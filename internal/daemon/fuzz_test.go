package daemon

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/testutil/golden"
)

// FuzzSync drives random Service, EndpointSlice and Node sets, mixing well-formed and
// malformed objects, through Daemon.sync (the runner's sync function) over a dual-stack
// fake kernel, and checks (see checkSync):
//
//   - no panic, and no sync ever returns an error: bad input must not fail the whole sync;
//   - after one full sync, every well-formed Service is programmed exactly as when it is
//     alone with the other well-formed ones on a fresh node, and every Service whose only
//     faults are bad list elements is programmed as its copy without them (run B); whatever
//     else is in the kernel is made of a malformed Service's valid values;
//   - a second sync, full and incremental, changes nothing and plans nothing;
//   - removing the bad objects converges to the state of never having had them;
//   - no Service's external or ingress IPs change the virtual servers (real servers, set
//     members) of another Service's cluster IP, whatever the names (checkOwnership).
//
// The input is a choice stream (see genScenario); seeds and corpus files are built from
// named scripts (fuzzSeeds), so each states the defect class it covers.
func FuzzSync(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(encodeSeed(s.script))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkBothBackends(t, data) })
}

// checkBothBackends checks the scenario data generates over the iptables backend, then over
// the nftables backend.
func checkBothBackends(t *testing.T, data []byte) {
	t.Helper()
	for _, nft := range []bool{false, true} {
		sc := genScenario(&byteChooser{data: data})
		sc.nftables = nft
		if err := checkSync(sc); err != nil {
			t.Fatalf("%s backend: %v", map[bool]string{false: "iptables", true: "nftables"}[nft], err)
		}
	}
}

// The named seeds, one subtest each, so a failure names its defect class.
func TestFuzzSyncSeeds(t *testing.T) {
	for _, s := range fuzzSeeds {
		t.Run(s.name, func(t *testing.T) { checkBothBackends(t, encodeSeed(s.script)) })
	}
}

// The committed corpus holds every named seed (go test -run TestFuzzSyncCorpus -update
// rewrites them), so `go test -fuzz` starts from them too.
func TestFuzzSyncCorpus(t *testing.T) {
	names := map[string]bool{}
	for _, s := range fuzzSeeds {
		if names[s.name] {
			t.Fatalf("seed name %s repeated", s.name)
		}
		names[s.name] = true
		golden.Check(t, "fuzz/FuzzSync/"+s.name, corpusFile(encodeSeed(s.script)))
	}
	entries, err := os.ReadDir("testdata/fuzz/FuzzSync")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !names[e.Name()] && !strings.HasPrefix(e.Name(), "crash-") {
			t.Errorf("testdata/fuzz/FuzzSync/%s is no named seed (name found crashes crash-<class>, or add a seed)", e.Name())
		}
	}
}

// corpusFile renders one []byte input in the go test fuzz v1 format.
func corpusFile(data []byte) string {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	fmt.Fprintf(&b, "[]byte(%q)\n", data)
	return b.String()
}
