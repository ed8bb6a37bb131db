package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kipvs/kipvs/internal/debugapi"
	"github.com/kipvs/kipvs/internal/proxy"
)

// checkCapacity reports, from the daemon's state, the Services its capacity limits keep
// out of the kernel, with the budget nearest its limit and the namespace holding the most
// of it: whose quota to cut, or which limit to raise.
func (c *checkup) checkCapacity() {
	const check = "capacity"
	if c.state == nil {
		return
	}
	for _, f := range c.state.Families {
		if f.Capacity == nil {
			continue
		}
		total := 0
		var reasons []string
		for r, n := range f.Capacity.NotProgrammed {
			if n > 0 {
				total += n
				reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
			}
		}
		slices.Sort(reasons)
		full := fullestBudget(f.Capacity.Budgets)
		budget := "no budget in use"
		if full != nil {
			budget = fmt.Sprintf("%s holds %s of %s: namespace %s holds %s", full.Name, proxy.Thousands(full.Used),
				limitText(full.Limit), full.TopNamespace, proxy.Thousands(full.TopUsed))
		}
		if total == 0 {
			c.add(check, OK, fmt.Sprintf("%s: every Service fits the capacity limits; the fullest budget: %s", f.Family, budget), "")
			continue
		}
		fix := "read the Warning Events of those Services (their reason names the limit); cut the quota of the namespace named, or raise the limit"
		if full != nil {
			fix = fmt.Sprintf("read the Warning Events of those Services (their reason names the limit); cut what namespace %s may create, or raise the limit", full.TopNamespace)
		}
		c.add(check, Warn, fmt.Sprintf("%s: %d Services not programmed (%s); the fullest budget: %s", f.Family, total, strings.Join(reasons, ", "), budget), fix)
	}
}

// fullestBudget is the budget nearest its limit (the largest without limits), or nil.
func fullestBudget(bs []debugapi.Budget) *debugapi.Budget {
	var best *debugapi.Budget
	share := func(b *debugapi.Budget) float64 {
		if b.Limit <= 0 {
			return 0
		}
		return float64(b.Used) / float64(b.Limit)
	}
	for i := range bs {
		if best == nil || share(&bs[i]) > share(best) || (share(&bs[i]) == share(best) && bs[i].Used > best.Used) {
			best = &bs[i]
		}
	}
	return best
}

func limitText(n int) string {
	if n <= 0 {
		return "no limit"
	}
	return proxy.Thousands(n)
}
