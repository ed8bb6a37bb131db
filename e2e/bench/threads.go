package bench

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ThreadCPU is one thread's share of a window (the proxy's first sync): what the
// scheduler says it ran and waited to run. Every thread of the system is sampled, kernel
// threads included, so a kworker or a softirq thread that competes with the proxy shows.
type ThreadCPU struct {
	PID     int    `json:"pid"`
	TID     int    `json:"tid"`
	Process string `json:"process"` // the thread group's command name
	Thread  string `json:"thread"`  // the thread's own
	// Policy is the thread's scheduling policy when last seen (0 normal, 1 FIFO, 2 RR).
	Policy int `json:"policy"`
	// RunSeconds is CPU time; WaitSeconds time runnable on a run queue but not running;
	// Slices how many times it was put on a CPU (/proc/PID/task/TID/schedstat).
	RunSeconds  float64 `json:"run_seconds"`
	WaitSeconds float64 `json:"wait_seconds"`
	Slices      uint64  `json:"slices"`
	// Ended says the thread had exited by the window's end: its figures stop at the last
	// sample.
	Ended bool `json:"ended,omitempty"`
	// States counts the samples after the first by what the thread was doing: "R cpuN"
	// (running or runnable, on CPU N), "S WCHAN" (sleeping, where: /proc/PID/task/TID/wchan), "D
	// FRAMES" (uninterruptible, the first kernel stack frames: a kernel mutex).
	States map[string]int `json:"states,omitempty"`
}

// threadSample is one thread's cumulative figures at a sample.
type threadSample struct {
	pid            int
	process, comm  string
	state          string // field 3: R, S, D...
	cpu            string // field 39: the CPU it last ran on
	policy         int
	runNS, waitNS  uint64
	slices         uint64
	lastSeenSample int
}

// Threads samples every thread of the system over a window. Start it before the window
// opens (threads that exist then count from that sample, later ones from zero), Sample it
// now and then (a thread that exits keeps its last sample: sample often enough for the
// threads that end inside the window) and read the result with Top.
type Threads struct {
	proc    string // /proc
	base    map[int]threadSample
	last    map[int]threadSample
	states  map[int]map[string]int
	samples int
	// cpuBase and cpuLast are /proc/stat's per-CPU lines at the first and the last sample.
	cpuBase, cpuLast map[string][]uint64
}

// CPUSplit is where one CPU's time went over a window, in seconds (/proc/stat): a thread's
// run time does not include the interrupts and softirqs it was interrupted by.
type CPUSplit struct {
	CPU     string  `json:"cpu"`
	User    float64 `json:"user"` // nice included
	System  float64 `json:"system"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	Idle    float64 `json:"idle"` // iowait included
	Steal   float64 `json:"steal"`
}

// parseProcStat reads /proc/stat's "cpuN" lines (not the "cpu" total): ten counters each.
func parseProcStat(b string) map[string][]uint64 {
	out := map[string][]uint64{}
	for line := range strings.Lines(b) {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		v := make([]uint64, 10)
		for i := range min(len(f)-1, 10) {
			v[i], _ = strconv.ParseUint(f[i+1], 10, 64)
		}
		out[f[0]] = v
	}
	return out
}

// CPUs is each CPU's split over the window, in CPU order; hz is the clock tick rate.
func (t *Threads) CPUs(hz uint64) []CPUSplit {
	var out []CPUSplit
	for _, cpu := range slices.Sorted(maps.Keys(t.cpuLast)) {
		a, b := t.cpuBase[cpu], t.cpuLast[cpu]
		if a == nil {
			a = make([]uint64, 10)
		}
		d := func(i ...int) float64 {
			var n uint64
			for _, j := range i {
				n += b[j] - min(a[j], b[j])
			}
			return TicksToSeconds(n, hz)
		}
		// user nice system idle iowait irq softirq steal guest guest_nice
		out = append(out, CPUSplit{CPU: cpu, User: d(0, 1), System: d(2), Idle: d(3, 4), IRQ: d(5), SoftIRQ: d(6), Steal: d(7)})
	}
	return out
}

// String is one line: the CPU and its seconds by kind.
func (c CPUSplit) String() string {
	return fmt.Sprintf("%s: user %.1fs, system %.1fs, irq %.1fs, softirq %.1fs, idle %.1fs, steal %.1fs", c.CPU, c.User, c.System, c.IRQ, c.SoftIRQ, c.Idle, c.Steal)
}

// NewThreads takes the window's first sample from proc (/proc).
func NewThreads(proc string) (*Threads, error) {
	t := &Threads{proc: proc, last: map[int]threadSample{}, states: map[int]map[string]int{}}
	if err := t.Sample(); err != nil {
		return nil, err
	}
	t.base = t.last
	t.last = map[int]threadSample{}
	t.states = map[int]map[string]int{}
	t.cpuBase = t.cpuLast
	for tid, s := range t.base {
		t.last[tid] = s
	}
	return t, nil
}

// Sample reads every thread's figures. Threads that exit while they are read are skipped.
func (t *Threads) Sample() error {
	t.samples++
	stat, err := os.ReadFile(filepath.Join(t.proc, "stat"))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	t.cpuLast = parseProcStat(string(stat))
	pids, err := os.ReadDir(t.proc)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, p := range pids {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		process, err := os.ReadFile(filepath.Join(t.proc, p.Name(), "comm"))
		if err != nil {
			continue
		}
		tasks, err := os.ReadDir(filepath.Join(t.proc, p.Name(), "task"))
		if err != nil {
			continue
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			dir := filepath.Join(t.proc, p.Name(), "task", task.Name())
			stat, err1 := os.ReadFile(filepath.Join(dir, "stat"))
			sched, err2 := os.ReadFile(filepath.Join(dir, "schedstat"))
			if err1 != nil || err2 != nil {
				continue
			}
			s, err := parseThread(string(stat), string(sched))
			if err != nil {
				return err
			}
			s.pid, s.process, s.lastSeenSample = pid, strings.TrimSpace(string(process)), t.samples
			t.last[tid] = s
			if st := threadState(dir, s.state, s.cpu); st != "" {
				if t.states[tid] == nil {
					t.states[tid] = map[string]int{}
				}
				t.states[tid][st]++
			}
		}
	}
	return nil
}

// threadState names what a thread in state (its stat's field 3) is doing, for
// ThreadCPU.States: "R" and the CPU it is on, "S" and its wait channel, "D" and its first
// kernel stack frames; "" for other states.
func threadState(dir, state, cpu string) string {
	switch state {
	case "R":
		return "R cpu" + cpu
	case "S":
		w, _ := os.ReadFile(filepath.Join(dir, "wchan"))
		return strings.TrimSpace("S " + string(w))
	case "D":
		b, _ := os.ReadFile(filepath.Join(dir, "stack"))
		var frames []string
		for line := range strings.Lines(string(b)) {
			// "[<0>] __mutex_lock.constprop.0+0x13c/0x4b0"
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(f[len(f)-1], "+")
			frames = append(frames, name)
			if len(frames) == 4 {
				break
			}
		}
		return strings.TrimSpace("D " + strings.Join(frames, "<"))
	}
	return ""
}

// parseThread reads the command name and the policy (field 41) of a /proc stat line and
// the three figures of a schedstat line ("run_ns wait_ns slices").
func parseThread(stat, sched string) (threadSample, error) {
	var s threadSample
	i, j := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if i < 0 || j < i {
		return s, fmt.Errorf("bench: /proc stat %q: no command name", stat)
	}
	s.comm = stat[i+1 : j]
	f := strings.Fields(stat[j+1:]) // f[0] is field 3
	if len(f) > 0 {
		s.state = f[0]
	}
	if len(f) < 39 {
		return s, fmt.Errorf("bench: /proc stat %q: %d fields after the name, want >= 39", stat, len(f))
	}
	pol, err := strconv.Atoi(f[38])
	if err != nil {
		return s, fmt.Errorf("bench: /proc stat policy: %w", err)
	}
	s.policy = pol
	s.cpu = f[36]
	g := strings.Fields(sched)
	if len(g) != 3 {
		return s, fmt.Errorf("bench: schedstat %q: want 3 fields", sched)
	}
	var v [3]uint64
	for k := range v {
		if v[k], err = strconv.ParseUint(g[k], 10, 64); err != nil {
			return s, fmt.Errorf("bench: schedstat %q: %w", sched, err)
		}
	}
	s.runNS, s.waitNS, s.slices = v[0], v[1], v[2]
	return s, nil
}

// Top returns the n threads that ran longest over the window (from the first sample to
// the last), longest first.
func (t *Threads) Top(n int) []ThreadCPU {
	var out []ThreadCPU
	for tid, s := range t.last {
		b := t.base[tid] // zero for a thread born inside the window
		if b.runNS > s.runNS || b.waitNS > s.waitNS {
			b = threadSample{} // the TID was reused
		}
		out = append(out, ThreadCPU{
			PID: s.pid, TID: tid, Process: s.process, Thread: s.comm, Policy: s.policy,
			RunSeconds: float64(s.runNS-b.runNS) / 1e9, WaitSeconds: float64(s.waitNS-b.waitNS) / 1e9,
			Slices: s.slices - b.slices, Ended: s.lastSeenSample < t.samples, States: t.states[tid],
		})
	}
	slices.SortFunc(out, func(a, b ThreadCPU) int {
		return cmp.Or(cmp.Compare(b.RunSeconds, a.RunSeconds), cmp.Compare(a.TID, b.TID))
	})
	return out[:min(n, len(out))]
}

// String is one line: process/thread[tid], policy, run, wait and slices.
func (c ThreadCPU) String() string {
	pol := "normal"
	switch c.Policy {
	case 1:
		pol = "FIFO"
	case 2:
		pol = "RR"
	case 3:
		pol = "batch"
	case 5:
		pol = "idle"
	}
	end := ""
	if c.Ended {
		end = ", ended"
	}
	var states []string
	for _, k := range slices.Sorted(maps.Keys(c.States)) {
		states = append(states, fmt.Sprintf("%s x%d", k, c.States[k]))
	}
	if len(states) > 0 {
		end += "; sampled " + strings.Join(states, ", ")
	}
	return fmt.Sprintf("%s/%s[%d] %s: ran %.1fs, waited %.1fs to run, %d slices%s", c.Process, c.Thread, c.TID, pol, c.RunSeconds, c.WaitSeconds, c.Slices, end)
}
