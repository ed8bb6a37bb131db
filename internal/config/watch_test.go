package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/go-cmp/cmp"
)

func TestConfigChanged(t *testing.T) {
	const path = "/var/lib/kube-proxy/config.conf"
	for _, tc := range []struct {
		name string
		ev   fsnotify.Event
		want bool
	}{
		{"written", fsnotify.Event{Name: path, Op: fsnotify.Write}, true},
		{"renamed away", fsnotify.Event{Name: path, Op: fsnotify.Rename}, true},
		{"replaced or created", fsnotify.Event{Name: path, Op: fsnotify.Create}, true},
		{"removed", fsnotify.Event{Name: path, Op: fsnotify.Remove}, false},
		{"mode changed", fsnotify.Event{Name: path, Op: fsnotify.Chmod}, false},
		{"ConfigMap ..data swapped", fsnotify.Event{Name: "/var/lib/kube-proxy/..data", Op: fsnotify.Create}, true},
		{"ConfigMap ..data_tmp made", fsnotify.Event{Name: "/var/lib/kube-proxy/..data_tmp", Op: fsnotify.Create}, false},
		{"ConfigMap ..data removed", fsnotify.Event{Name: "/var/lib/kube-proxy/..data", Op: fsnotify.Remove}, false},
		{"another file written", fsnotify.Event{Name: "/var/lib/kube-proxy/kubeconfig.conf", Op: fsnotify.Write}, false},
		{"unclean name", fsnotify.Event{Name: "/var/lib/kube-proxy//config.conf", Op: fsnotify.Write}, true},
	} {
		if got := configChanged(path, tc.ev); got != tc.want {
			t.Errorf("%s: configChanged(%v) = %t, want %t", tc.name, tc.ev, got, tc.want)
		}
	}
}

// configMapDir lays out dir as the kubelet lays out a ConfigMap volume: the data in a
// timestamped directory, ..data a symlink to it, and each key a symlink through ..data.
func configMapDir(t *testing.T, dir, stamp, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(dir, stamp), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, stamp, "config.conf"), []byte(content), 0o644))
	must(t, os.Symlink(stamp, filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	if _, err := os.Lstat(filepath.Join(dir, "config.conf")); errors.Is(err, os.ErrNotExist) {
		must(t, os.Symlink("..data/config.conf", filepath.Join(dir, "config.conf")))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A real inotify watch on a temporary directory: each change is reported as the first
// event that counts, so the events that do not count (which come before it) are shown to
// be ignored without waiting for anything.
func TestFileWatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup makes the config file and returns its path.
		setup func(t *testing.T, dir string) string
		// change changes things; the last step must count as a change.
		change func(t *testing.T, dir, path string)
		want   func(dir, path string) FileChangedError
	}{
		{"written in place",
			func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "config.yaml")
				must(t, os.WriteFile(p, []byte("a"), 0o644))
				return p
			},
			func(t *testing.T, dir, path string) {
				must(t, os.Chmod(path, 0o600))                                              // ignored
				must(t, os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("x"), 0o644)) // ignored
				must(t, os.WriteFile(path, []byte("b"), 0o644))
			},
			func(dir, path string) FileChangedError { return FileChangedError{Path: path, Name: path, Op: "WRITE"} }},
		{"replaced by a file renamed over it",
			func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "config.yaml")
				must(t, os.WriteFile(p, []byte("a"), 0o644))
				return p
			},
			func(t *testing.T, dir, path string) {
				tmp := filepath.Join(dir, ".config.yaml.tmp")
				must(t, os.WriteFile(tmp, []byte("b"), 0o644)) // ignored
				must(t, os.Rename(tmp, path))
			},
			func(dir, path string) FileChangedError { return FileChangedError{Path: path, Name: path, Op: "CREATE"} }},
		{"removed, then back",
			func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "config.yaml")
				must(t, os.WriteFile(p, []byte("a"), 0o644))
				return p
			},
			func(t *testing.T, dir, path string) {
				must(t, os.Remove(path)) // ignored: kipvs keeps running, as kube-proxy does
				must(t, os.WriteFile(path, []byte("b"), 0o644))
			},
			func(dir, path string) FileChangedError { return FileChangedError{Path: path, Name: path, Op: "CREATE"} }},
		{"ConfigMap volume updated",
			func(t *testing.T, dir string) string {
				configMapDir(t, dir, "..2026_11_25_01_00_00.1", "a")
				return filepath.Join(dir, "config.conf")
			},
			func(t *testing.T, dir, path string) {
				configMapDir(t, dir, "..2026_11_25_01_05_00.2", "b")
				must(t, os.RemoveAll(filepath.Join(dir, "..2026_11_25_01_00_00.1")))
			},
			func(dir, path string) FileChangedError {
				return FileChangedError{Path: path, Name: filepath.Join(dir, "..data"), Op: "CREATE"}
			}},
		{"symlink's target written elsewhere",
			func(t *testing.T, dir string) string {
				must(t, os.Mkdir(filepath.Join(dir, "etc"), 0o755))
				must(t, os.Mkdir(filepath.Join(dir, "real"), 0o755))
				must(t, os.WriteFile(filepath.Join(dir, "real", "kp.yaml"), []byte("a"), 0o644))
				p := filepath.Join(dir, "etc", "kube-proxy.yaml")
				must(t, os.Symlink(filepath.Join(dir, "real", "kp.yaml"), p))
				return p
			},
			func(t *testing.T, dir, path string) {
				must(t, os.WriteFile(filepath.Join(dir, "real", "kp.yaml"), []byte("b"), 0o644))
			},
			func(dir, path string) FileChangedError { return FileChangedError{Path: path, Name: path, Op: "WRITE"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.setup(t, dir)
			w, err := WatchFile(path)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			tc.change(t, dir, path)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = w.Wait(ctx)
			var fc *FileChangedError
			if !errors.As(err, &fc) {
				t.Fatalf("Wait = %v, want a *FileChangedError", err)
			}
			if diff := cmp.Diff(tc.want(dir, path), *fc); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFileWatchEndsWithContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(p, []byte("a"), 0o644))
	w, err := WatchFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Wait(ctx); err != nil {
		t.Errorf("Wait after cancel = %v, want nil", err)
	}
}

func TestWatchFileFailsWithoutTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := WatchFile(p); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WatchFile(%s) = %v, want a not-exist error naming it", p, err)
	}
}
