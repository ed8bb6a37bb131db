package bench

import (
	"strings"
	"testing"

	"github.com/kipvs/kipvs/internal/testutil/golden"
)

// dataPathRun is sampleRun's records at N=500 with data path and behaviour figures.
func dataPathRun() Run {
	run := sampleRun()
	run.Records = run.Records[:2]
	load := func(path, mode string, rate, p50, p99 float64) LoadResult {
		return LoadResult{Path: path, Mode: mode, Target: "t", Workers: 4, Seconds: 10, Count: int(rate * 10), Rate: rate, P50: p50, P99: p99, CPUCores: 0.5}
	}
	dp := func(scale float64) *DataPath {
		d := &DataPath{Endpoints: 10, PinnedCPU: 1}
		for _, path := range DataPaths() {
			f := 1.0
			if path != PathFloor {
				f = scale
			}
			d.Results = append(d.Results,
				load(path, LoadTCPNew, 800*f, 0.004, 0.02), load(path, LoadTCPKeepAlive, 4000*f, 0.0009, 0.005), load(path, LoadUDP, 3000*f, 0.001, 0.006))
		}
		return d
	}
	run.Records[0].DataPath = dp(0.5)
	run.Records[0].Behaviour = &Behaviour{HeldAfterRemoval: HeldAnswered, AffinityBackends: 1, AffinityConnections: 20}
	run.Records[1].DataPath = dp(0.8)
	run.Records[1].DataPath.Results[4].Errors = 3 // cluster IP, kept-alive
	run.Records[1].Behaviour = &Behaviour{HeldAfterRemoval: HeldReset, AffinityBackends: 1, AffinityConnections: 20}
	return run
}

func TestDataPathTables(t *testing.T) {
	run := dataPathRun()
	golden.Check(t, "datapath-table.golden.md", DataPathTable(run)+"\n"+BehaviourTable(run))
	if s := DataPathTable(sampleRun()) + BehaviourTable(sampleRun()); s != "" {
		t.Errorf("tables of records without data path figures: %q, want none", s)
	}
}

func TestRenderSVGDataPath(t *testing.T) {
	svg := string(RenderSVG(dataPathRun()))
	for _, want := range []string{`width="1500"`, "New TCP connections/s through the cluster IP", "kipvs floor", "kube-proxy cluster IP"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot of a run with data path figures has no %q", want)
		}
	}
	if old := string(RenderSVG(sampleRun())); strings.Contains(old, "New TCP connections") || !strings.Contains(old, `width="1000"`) {
		t.Error("the plot of a run without data path figures has a connections panel")
	}
}
