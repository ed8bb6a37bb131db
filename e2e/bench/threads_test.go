package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// writeThread writes /proc/PID/comm and /proc/PID/task/TID/{stat,schedstat} under root.
func writeThread(t *testing.T, root string, pid, tid int, process, comm string, policy int, run, wait, slices string) {
	t.Helper()
	p := filepath.Join(root, itoa(pid))
	d := filepath.Join(p, "task", itoa(tid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	// Fields 3..52 after the name; field 41 (policy) is index 38 after it.
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[0] = "R"
	switch comm {
	case "kworker/0:1":
		f[0] = "S"
		writeFile(t, filepath.Join(d, "wchan"), "worker_thread")
	case "a (b) c":
		f[0] = "D"
		writeFile(t, filepath.Join(d, "stack"), "[<0>] __mutex_lock.constprop.0+0x13c/0x4b0\n[<0>] rtnetlink_rcv_msg+0x13a/0x390\n[<0>] netlink_rcv_skb+0x51/0x100\n[<0>] netlink_unicast+0x241/0x360\n[<0>] netlink_sendmsg+0x250/0x4c0\n")
	}
	f[38] = itoa(policy)
	stat := itoa(tid) + " (" + comm + ") " + strings.Join(f, " ") + "\n"
	for name, body := range map[string]string{
		filepath.Join(p, "comm"):      process + "\n",
		filepath.Join(d, "stat"):      stat,
		filepath.Join(d, "schedstat"): run + " " + wait + " " + slices + "\n",
	} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestThreadsTop(t *testing.T) {
	root := t.TempDir()
	writeThread(t, root, 2, 30, "kthreadd", "kworker/0:1", 0, "1000000000", "0", "10")
	writeThread(t, root, 7, 7, "bench.test", "bench.test", 0, "5000000000", "0", "3")
	writeFile(t, filepath.Join(root, "stat"), "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\nintr 1\n")
	th, err := NewThreads(root)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy starts: a FIFO thread (a name with a space and parentheses) that ends
	// before the window does, and one that lives on.
	writeThread(t, root, 9, 9, "kipvs", "kipvs", 0, "2000000000", "500000000", "40")
	writeThread(t, root, 9, 11, "kipvs", "a (b) c", 1, "3000000000", "0", "7")
	writeThread(t, root, 2, 30, "kthreadd", "kworker/0:1", 0, "1500000000", "250000000", "20")
	if err := th.Sample(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "9", "task", "11")); err != nil {
		t.Fatal(err)
	}
	writeThread(t, root, 9, 9, "kipvs", "kipvs", 0, "2500000000", "600000000", "50")
	writeFile(t, filepath.Join(root, "stat"), "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 105 2 25 60 3 4 300 1 0 0\ncpu1 5 0 5 150 0 0 0 0 0 0\nintr 1\n")
	if err := th.Sample(); err != nil {
		t.Fatal(err)
	}
	got := th.Top(3)
	want := []ThreadCPU{
		{PID: 9, TID: 11, Process: "kipvs", Thread: "a (b) c", Policy: 1, RunSeconds: 3, Slices: 7, Ended: true,
			States: map[string]int{"D __mutex_lock.constprop.0<rtnetlink_rcv_msg<netlink_rcv_skb<netlink_unicast": 1}},
		{PID: 9, TID: 9, Process: "kipvs", Thread: "kipvs", RunSeconds: 2.5, WaitSeconds: 0.6, Slices: 50, States: map[string]int{"R cpu0": 2}},
		{PID: 2, TID: 30, Process: "kthreadd", Thread: "kworker/0:1", RunSeconds: 0.5, WaitSeconds: 0.25, Slices: 10,
			States: map[string]int{"S worker_thread": 2}},
	}
	if len(got) != len(want) {
		t.Fatalf("Top(3) = %v, want %v", got, want)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("Top(3)[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	cpus := th.CPUs(100)
	wantCPUs := []CPUSplit{{CPU: "cpu0", User: 1.02, System: 0.2, Idle: 0.13, IRQ: 0.04, SoftIRQ: 3, Steal: 0.01}, {CPU: "cpu1", Idle: 1}}
	if !reflect.DeepEqual(cpus, wantCPUs) {
		t.Errorf("CPUs(100) = %+v, want %+v", cpus, wantCPUs)
	}
	if s := got[0].String(); s != "kipvs/a (b) c[11] FIFO: ran 3.0s, waited 0.0s to run, 7 slices, ended; sampled D __mutex_lock.constprop.0<rtnetlink_rcv_msg<netlink_rcv_skb<netlink_unicast x1" {
		t.Errorf("String() = %q", s)
	}
}
