package bench

import (
	"strings"
	"testing"
	"time"
)

func TestSummarizeLoad(t *testing.T) {
	var samples []time.Duration
	for i := 1; i <= 200; i++ { // 1 ms .. 200 ms
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	r := SummarizeLoad(LoadTCPNew, "10.96.0.10:80", 4, samples, 3, 10*time.Second, 2500*time.Millisecond)
	want := LoadResult{Mode: LoadTCPNew, Target: "10.96.0.10:80", Workers: 4, Seconds: 10, Count: 200, Errors: 3,
		Rate: 20, P50: 0.1, P99: 0.198, CPUCores: 0.25}
	if r != want {
		t.Errorf("SummarizeLoad:\n got %+v\nwant %+v", r, want)
	}
	if z := SummarizeLoad(LoadUDP, "x", 1, nil, 5, time.Second, 0); z.Count != 0 || z.P50 != 0 || z.Rate != 0 || z.Errors != 5 {
		t.Errorf("SummarizeLoad without samples: %+v", z)
	}
}

func TestLoadResultLine(t *testing.T) {
	in := LoadResult{Mode: LoadUDP, Target: "10.244.0.10:8080", Workers: 4, Seconds: 10.01, Count: 5000, Rate: 499.5, P50: 0.007, P99: 0.02, CPUCores: 0.4}
	line, err := MarshalLoadResult(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseLoadResult("some log line\n" + line + "\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Errorf("ParseLoadResult(MarshalLoadResult(r)) = %+v, want %+v", out, in)
	}
	if _, err := ParseLoadResult("loadgen: dial tcp: refused\n"); err == nil || !strings.Contains(err.Error(), "no LOADGEN-RESULT") {
		t.Errorf("ParseLoadResult without a result line: %v", err)
	}
}
