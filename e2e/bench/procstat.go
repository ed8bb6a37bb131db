package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUTimes are a process's CPU times from /proc/PID/stat, in clock ticks.
type CPUTimes struct {
	User, System           uint64 // the process's own threads
	ChildUser, ChildSystem uint64 // children it has waited for (kube-proxy's ipset, iptables-restore)
}

// Total is all four together.
func (c CPUTimes) Total() uint64 { return c.User + c.System + c.ChildUser + c.ChildSystem }

// ParseStat reads utime, stime, cutime and cstime (fields 14-17) from a /proc/PID/stat
// line. The command name (field 2) may hold spaces and parentheses: fields are counted
// after its last ')'.
func ParseStat(stat string) (CPUTimes, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return CPUTimes{}, fmt.Errorf("bench: /proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return CPUTimes{}, fmt.Errorf("bench: /proc stat %q: %d fields after the name, want >= 15", stat, len(f))
	}
	var v [4]uint64
	for j := range v {
		n, err := strconv.ParseUint(f[11+j], 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("bench: /proc stat field %d: %w", 14+j, err)
		}
		v[j] = n
	}
	return CPUTimes{User: v[0], System: v[1], ChildUser: v[2], ChildSystem: v[3]}, nil
}

// ReadCPU reads /proc/PID/stat.
func ReadCPU(pid int) (CPUTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPUTimes{}, fmt.Errorf("bench: %w", err)
	}
	return ParseStat(string(b))
}

// ParseVmHWM returns the peak resident set size (VmHWM) from /proc/PID/status, in bytes.
func ParseVmHWM(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("bench: /proc status line %q: want VALUE kB", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc status line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("bench: /proc status has no VmHWM line")
}

// ReadPeakRSS reads VmHWM from /proc/PID/status.
func ReadPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	return ParseVmHWM(string(b))
}

// atClkTck is the auxiliary vector entry of the clock tick rate (AT_CLKTCK).
const atClkTck = 17

// ParseClockTicks returns AT_CLKTCK from a 64-bit little-endian auxiliary vector
// (/proc/self/auxv on x86-64): the unit of /proc/PID/stat's times, what sysconf(_SC_CLK_TCK)
// answers in C.
func ParseClockTicks(auxv []byte) (uint64, error) {
	for i := 0; i+16 <= len(auxv); i += 16 {
		k := binary.LittleEndian.Uint64(auxv[i:])
		v := binary.LittleEndian.Uint64(auxv[i+8:])
		if k == 0 {
			break
		}
		if k == atClkTck {
			if v == 0 {
				return 0, errors.New("bench: AT_CLKTCK is 0")
			}
			return v, nil
		}
	}
	return 0, errors.New("bench: no AT_CLKTCK in the auxiliary vector")
}

// ClockTicks reads the clock tick rate from /proc/self/auxv.
func ClockTicks() (uint64, error) {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	return ParseClockTicks(b)
}

// TicksToSeconds converts clock ticks at hz to seconds.
func TicksToSeconds(ticks, hz uint64) float64 { return float64(ticks) / float64(hz) }

// Cores is CPU seconds spent over a wall-clock window, in cores.
func Cores(cpuSeconds float64, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return cpuSeconds / window.Seconds()
}

// ParseLoadAvg returns the 1-minute load average from /proc/loadavg.
func ParseLoadAvg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, fmt.Errorf("bench: /proc/loadavg %q: too few fields", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("bench: /proc/loadavg %q: %w", s, err)
	}
	return v, nil
}
