package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// FileChangedError says that the --config file changed while kipvs ran.
type FileChangedError struct {
	// Path is the --config path.
	Path string
	// Name is the path the event named: Path, or the ConfigMap volume's ..data link.
	Name string
	// Op is what happened to it, as fsnotify names it ("WRITE", "CREATE", "RENAME").
	Op string
}

func (e *FileChangedError) Error() string {
	if e.Name != e.Path {
		return fmt.Sprintf("the config file %s changed (%s %s); exiting to be restarted with it", e.Path, e.Op, e.Name)
	}
	return fmt.Sprintf("the config file %s changed (%s); exiting to be restarted with it", e.Path, e.Op)
}

// FileWatch watches the --config file for changes. kube-proxy v1.34 watches its config file
// and exits when it is written or renamed, for the kubelet or systemd to restart it with the
// new file. FileWatch sees those changes too, and also the ways files are commonly replaced,
// which kube-proxy misses (kubernetes issue 132877): a file replaced by another renamed over
// it, a symlink replaced, and a ConfigMap volume update, where the kubelet swaps the
// volume's ..data symlink to a new directory.
type FileWatch struct {
	path    string
	watcher *fsnotify.Watcher
}

// WatchFile starts watching the config file at path (through a symlink, the file it points
// to) and the directory holding path. It fails when the watch cannot be set up (as kube-proxy
// fails to start then). Close releases it.
func WatchFile(path string) (*FileWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch the config file %s: %w", path, err)
	}
	path = filepath.Clean(path)
	for _, p := range []string{path, filepath.Dir(path)} {
		if err := w.Add(p); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("watch the config file %s: %w", path, err)
		}
	}
	return &FileWatch{path: path, watcher: w}, nil
}

// Wait blocks until the file changes, which it returns as a *FileChangedError, or the watch
// fails, which it returns as an error; it returns nil once ctx is done.
func (fw *FileWatch) Wait(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.watcher.Events:
			if !ok {
				return errors.New("the config file watch was closed")
			}
			if configChanged(fw.path, ev) {
				return &FileChangedError{Path: fw.path, Name: filepath.Clean(ev.Name), Op: changeOp(ev.Op)}
			}
		case err, ok := <-fw.watcher.Errors:
			if !ok {
				return errors.New("the config file watch was closed")
			}
			return fmt.Errorf("watch the config file %s: %w", fw.path, err)
		}
	}
}

// Close stops watching.
func (fw *FileWatch) Close() error { return fw.watcher.Close() }

// configChanged reports whether an event from the watches WatchFile set up means the
// config file at path has new content: the file written or renamed (what kube-proxy acts
// on), a file or symlink created at path (replaced, or back after a removal), or a new
// ..data link next to it (a ConfigMap or Secret volume update). A removal alone, a change
// of mode and events about other files do not count.
func configChanged(path string, ev fsnotify.Event) bool {
	switch filepath.Clean(ev.Name) {
	case path:
		return ev.Has(fsnotify.Write) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Create)
	case filepath.Join(filepath.Dir(path), "..data"):
		return ev.Has(fsnotify.Create)
	}
	return false
}

func changeOp(op fsnotify.Op) string {
	for _, o := range []fsnotify.Op{fsnotify.Write, fsnotify.Create, fsnotify.Rename} {
		if op.Has(o) {
			return o.String()
		}
	}
	return op.String()
}
