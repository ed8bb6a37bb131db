package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/testutil/poll"
	"github.com/kipvs/kipvs/internal/watch/filesource"
)

// The generated source file is what --kipvs-source-file reads: every Service and
// EndpointSlice, without an issue; the floor files name the same objects.
func TestGeneratedFiles(t *testing.T) {
	const n, e = 30, 3
	var src, addrs, ipvs strings.Builder
	writeSource(&src, n, e)
	writeAddresses(&addrs, n)
	writeIPVS(&ipvs, n, e)
	path := filepath.Join(t.TempDir(), "services.json")
	if err := os.WriteFile(path, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := filesource.New(filesource.Options{Path: path, PollInterval: 10 * time.Millisecond,
		SettleInterval: 10 * time.Millisecond, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-s.Done() }()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var res filesource.LoadResult
	if _, err := poll.Wait(10*time.Second, "the file read", func() (bool, string) {
		res = s.LastResult()
		return res.Generation > 0 || res.Err != nil, ""
	}); err != nil {
		t.Fatal(err)
	}
	if res.Err != nil || res.Services != n || res.EndpointSlices != n || len(res.Issues) > 0 {
		t.Fatalf("read %d Services and %d EndpointSlices, want %d each; error %v; issues %v", res.Services, res.EndpointSlices, n, res.Err, res.Issues)
	}
	if got := strings.Count(addrs.String(), "\n"); got != n || !strings.HasPrefix(addrs.String(), "address add 10.96.16.0/32 dev kube-ipvs0\n") {
		t.Fatalf("%d address lines, want %d:\n%s", got, n, addrs.String())
	}
	if a, r := strings.Count(ipvs.String(), "-A "), strings.Count(ipvs.String(), "-a "); a != n || r != n*e ||
		!strings.Contains(ipvs.String(), "-a -t 10.96.16.0:80 -r 10.128.0.1:8080 -m -w 1\n") {
		t.Fatalf("%d virtual servers and %d real servers, want %d and %d:\n%s", a, r, n, n*e, ipvs.String())
	}
}
