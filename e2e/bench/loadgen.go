package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The load generator's modes (cmd/loadgen -mode).
const (
	// LoadTCPNew is new TCP connections: connect, one small request, read the whole reply,
	// close; a sample is the time from the connect to the end of the reply.
	LoadTCPNew = "tcp-new"
	// LoadTCPKeepAlive is requests over connections kept open: a line sent and echoed back.
	LoadTCPKeepAlive = "tcp-keepalive"
	// LoadUDP is a small datagram sent and answered (DNS-sized), from one socket per worker.
	LoadUDP = "udp"
)

// LoadModes are the load generator's modes in the order the bench measures them.
func LoadModes() []string { return []string{LoadTCPNew, LoadTCPKeepAlive, LoadUDP} }

// LoadResult is one load generator measurement: a mode against one target, a number of
// workers for a duration.
type LoadResult struct {
	// Path is which way the bench sent it (PathFloor and the others; cmd/loadgen leaves it
	// empty).
	Path    string  `json:"path,omitempty"`
	Mode    string  `json:"mode"`
	Target  string  `json:"target"` // ADDR:PORT
	Workers int     `json:"workers"`
	Seconds float64 `json:"seconds"` // the measurement's wall time
	// Count is the requests answered, Errors those that failed or timed out (each error
	// also ends the worker's connection, which the next request opens again).
	Count  int `json:"count"`
	Errors int `json:"errors"`
	// Rate is Count / Seconds; P50 and P99 the answered requests' latency in seconds.
	Rate float64 `json:"rate"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	// CPUCores is the generator's own user+system CPU time over Seconds: near 1 for a
	// generator pinned to one CPU, it was the bottleneck.
	CPUCores float64 `json:"cpu_cores"`
	// FirstError is the first error's text, for the record.
	FirstError string `json:"first_error,omitempty"`
}

// SummarizeLoad builds a LoadResult from the answered requests' latencies (all workers'),
// the errors, the wall time and the generator's CPU time over it.
func SummarizeLoad(mode, target string, workers int, samples []time.Duration, errs int, wall, cpu time.Duration) LoadResult {
	r := LoadResult{Mode: mode, Target: target, Workers: workers, Seconds: wall.Seconds(), Count: len(samples), Errors: errs}
	if wall > 0 {
		r.Rate = float64(len(samples)) / wall.Seconds()
		r.CPUCores = cpu.Seconds() / wall.Seconds()
	}
	if len(samples) > 0 {
		s := make([]float64, len(samples))
		for i, d := range samples {
			s[i] = d.Seconds()
		}
		r.P50, r.P99 = Percentile(s, 50), Percentile(s, 99)
	}
	return r
}

// LoadResultPrefix starts the line cmd/loadgen prints its LoadResult on.
const LoadResultPrefix = "LOADGEN-RESULT "

// MarshalLoadResult renders r as cmd/loadgen's result line.
func MarshalLoadResult(r LoadResult) (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("bench: encode load result: %w", err)
	}
	return LoadResultPrefix + string(b), nil
}

// ParseLoadResult finds the LoadResultPrefix line in cmd/loadgen's output.
func ParseLoadResult(out string) (LoadResult, error) {
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), LoadResultPrefix)
		if !ok {
			continue
		}
		var r LoadResult
		if err := json.Unmarshal([]byte(rest), &r); err != nil {
			return LoadResult{}, fmt.Errorf("bench: loadgen result %q: %w", rest, err)
		}
		return r, nil
	}
	return LoadResult{}, fmt.Errorf("bench: no %sline in the load generator's output %q", LoadResultPrefix, out)
}
