// Command benchplot draws one plot from several make bench-compare result files, e.g. the
// 500-2,000 x 10 run of both proxies with kipvs's 10,000 x 10 and 50,000 x 4 runs:
//
//	go run ./hack/benchplot -o docs/bench/scale.svg docs/bench/bench-2k.json docs/bench/kipvs-10k-steps.json docs/bench/kipvs-50k.json
//
// A later file's record replaces an earlier one's of the same proxy and N. The caption takes
// the first file's parameters; endpoints per Service that differ are named in the caption.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kipvs/kipvs/e2e/bench"
)

func main() {
	out := flag.String("o", "", "the SVG to write")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchplot -o OUT.svg RESULT.json...")
		os.Exit(2)
	}
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(out string, files []string) error {
	var merged bench.Run
	var dates []string
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r bench.Run
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if d, _, _ := strings.Cut(r.Date, "T"); !slices.Contains(dates, d) {
			dates = append(dates, d)
		}
		if i == 0 {
			merged.Date, merged.Params, merged.Host = r.Date, r.Params, r.Host
			merged.Params.N = nil
		}
		for _, rec := range r.Records {
			merged.Records = slices.DeleteFunc(merged.Records, func(o bench.Record) bool { return o.Proxy == rec.Proxy && o.N == rec.N })
			merged.Records = append(merged.Records, rec)
		}
	}
	var es []string
	mem := map[int]bool{}
	for _, rec := range merged.Records {
		mem[rec.VM.MemoryMB] = true
		if !slices.Contains(merged.Params.N, rec.N) {
			merged.Params.N = append(merged.Params.N, rec.N)
		}
		if e := strconv.Itoa(rec.E); rec.E != merged.Params.E && !slices.Contains(es, e) {
			es = append(es, e)
		}
	}
	slices.Sort(merged.Params.N)
	svg := bench.RenderSVG(merged)
	if len(es) > 0 {
		// The caption names the first file's endpoints per Service; say the others.
		from := fmt.Sprintf("x %d endpoints", merged.Params.E)
		svg = []byte(strings.Replace(string(svg), from, fmt.Sprintf("x %d (some: %s) endpoints", merged.Params.E, strings.Join(es, ", ")), 1))
	}
	// The caption names the first file's date and the first record's VM memory: say all.
	slices.Sort(dates)
	if d, _, _ := strings.Cut(merged.Date, "T"); len(dates) > 1 {
		svg = []byte(strings.Replace(string(svg), "; "+d+"<", "; "+dates[0]+" to "+dates[len(dates)-1]+"<", 1))
	}
	if len(mem) > 1 && len(merged.Records) > 0 {
		var ms []int
		for m := range mem {
			ms = append(ms, m)
		}
		slices.Sort(ms)
		first := fmt.Sprintf("%d MiB", merged.Records[0].VM.MemoryMB)
		var parts []string
		for _, m := range ms {
			parts = append(parts, strconv.Itoa(m))
		}
		svg = []byte(strings.Replace(string(svg), first, strings.Join(parts, " or ")+" MiB", 1))
	}
	return os.WriteFile(out, svg, 0o644)
}
