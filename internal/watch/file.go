package watch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// DefaultPollInterval is how often FileSource checks its file when no interval is given.
const DefaultPollInterval = time.Second

// racyWindow: a file modified within this long of our read may change again without its
// mtime moving (coarse filesystem timestamps), so it is re-read until it is older.
const racyWindow = 2 * time.Second

// FileSourceOptions configures NewFileSource.
type FileSourceOptions struct {
	// Path of the stream (--kipvs-source-file). Required.
	Path string
	// NodeName selects the Node object of the file to use as this node's Node (optional:
	// without it, or without a matching Node in the file, Node() is nil).
	NodeName string
	// PollInterval between checks of the file's metadata. Default DefaultPollInterval.
	PollInterval time.Duration
	// Clock drives polling and timestamps. Default: real.
	Clock clock.WithTicker
	// Logger is required.
	Logger *zap.Logger
}

// LoadResult describes the latest read of the source file.
type LoadResult struct {
	Path string
	// Time of the latest read attempt that found changed content or failed.
	Time time.Time
	// Generation counts the reads whose content was applied (the first successful read is 1).
	Generation uint64
	// Counts of objects applied by the latest applied read.
	Services, EndpointSlices, ServiceCIDRs int
	Node                                   bool
	// Issues of the latest applied read: objects skipped or replaced, with document index.
	Issues []DecodeIssue
	// Err is set while the file cannot be read; the last good content stays in effect.
	Err error
}

// FileSource serves Services, EndpointSlices, an optional Node and optional ServiceCIDRs
// from a YAML or JSON stream in a file, and re-reads the file when it changes.
//
// Change detection polls the file's metadata (device, inode, size, mtime, ctime) every
// PollInterval; a file modified less than two seconds before it was read is re-read at the
// next poll as well, since a second write within the filesystem's timestamp granularity would
// leave the metadata unchanged. Re-read content is compared by SHA-256, so an unchanged file
// causes no reload. Objects are defaulted as the apiserver would (service type, protocols,
// target ports, clusterIPs/ipFamilies, traffic policies, namespace "default"...), since
// hand-written files rarely spell those out.
type FileSource struct {
	*store
	opts    FileSourceOptions
	dec     *decoder
	started atomic.Bool
	done    chan struct{}

	// afterPoll, when set (tests), runs after every poll of the background loop.
	afterPoll func()

	mu      sync.Mutex // serialises reads and guards the fields below
	sig     fileSig
	haveSig bool
	racy    bool
	hash    [sha256.Size]byte
	last    LoadResult
}

var _ Source = (*FileSource)(nil)

// fileSig is the metadata that changes when a file is rewritten or replaced.
type fileSig struct {
	dev, ino     uint64
	size         int64
	mtime, ctime time.Time
}

func sigOf(fi os.FileInfo) fileSig {
	s := fileSig{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev = uint64(st.Dev) //nolint:unconvert // width differs between architectures
		s.ino = st.Ino
		s.ctime = time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)) //nolint:unconvert
	}
	return s
}

// NewFileSource checks opts and returns an unstarted source.
func NewFileSource(opts FileSourceOptions) (*FileSource, error) {
	var errs []error
	if opts.Path == "" {
		errs = append(errs, errors.New("watch: FileSourceOptions.Path is required"))
	}
	if opts.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("watch: FileSourceOptions.PollInterval %v is negative", opts.PollInterval))
	}
	if opts.Logger == nil {
		errs = append(errs, errors.New("watch: FileSourceOptions.Logger is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	dec, err := newDecoder()
	if err != nil {
		return nil, err
	}
	log := opts.Logger.With(zap.String("source", "file"), zap.String("path", opts.Path))
	return &FileSource{
		store: newStore(log, opts.Clock),
		opts:  opts,
		dec:   dec,
		done:  make(chan struct{}),
		last:  LoadResult{Path: opts.Path},
	}, nil
}

// Start reads the file (an error if it is missing or unreadable; malformed objects are only
// reported), marks the source synced, and polls the file until ctx is cancelled.
func (s *FileSource) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("watch: FileSource started twice")
	}
	if _, err := s.reload(true); err != nil {
		close(s.done)
		return err
	}
	s.store.markSynced()
	go func() {
		defer close(s.done)
		t := s.opts.Clock.NewTicker(s.opts.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				_, _ = s.reload(false) // failures are logged and kept in LastResult
				if s.afterPoll != nil {
					s.afterPoll()
				}
			}
		}
	}()
	return nil
}

// Done is closed once the polling goroutine has exited after ctx was cancelled.
func (s *FileSource) Done() <-chan struct{} { return s.done }

// LastResult returns the outcome of the latest read.
func (s *FileSource) LastResult() LoadResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.last
	r.Issues = slices.Clone(r.Issues)
	return r
}

// reload reads the file if its metadata changed (or force), and applies it if its content
// changed (or force). It reports whether new content was applied. A read failure keeps the
// current content and is returned (and, when it starts, logged).
func (s *FileSource) reload(force bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	fi, err := os.Stat(s.opts.Path)
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%s is a directory", s.opts.Path)
	}
	if err != nil {
		return false, s.readFailedLocked(fmt.Errorf("source file: %w", err))
	}
	sig := sigOf(fi)
	if !force && s.haveSig && sig == s.sig && !s.racy {
		return false, nil
	}
	data, err := os.ReadFile(s.opts.Path)
	if err != nil {
		return false, s.readFailedLocked(fmt.Errorf("source file: %w", err))
	}
	now := s.opts.Clock.Now()
	s.sig, s.haveSig = sig, true
	s.racy = now.Sub(sig.mtime) < racyWindow
	if s.last.Err != nil {
		s.log.Info("source file is readable again")
		s.last.Err = nil
	}
	h := sha256.Sum256(data)
	if !force && h == s.hash {
		return false, nil
	}
	s.hash = h

	res := s.dec.decode(s.opts.Path, data, s.opts.NodeName)
	for _, is := range res.issues {
		s.log.Warn("skipping object of source file",
			zap.Int("document", is.Document), zap.Int("line", is.Line), zap.Int("item", is.Item),
			zap.String("object", is.Object), zap.Error(is.Err))
	}
	s.store.replaceAll(res.state)
	s.last = LoadResult{
		Path:           s.opts.Path,
		Time:           now,
		Generation:     s.last.Generation + 1,
		Services:       len(res.state.services),
		EndpointSlices: len(res.state.slices),
		ServiceCIDRs:   len(res.state.serviceCIDRs),
		Node:           res.state.node != nil,
		Issues:         res.issues,
	}
	s.log.Info("loaded source file",
		zap.Uint64("generation", s.last.Generation), zap.Int("services", s.last.Services),
		zap.Int("endpointSlices", s.last.EndpointSlices), zap.Bool("node", s.last.Node),
		zap.Int("serviceCIDRs", s.last.ServiceCIDRs), zap.Int("issues", len(res.issues)))
	return true, nil
}

func (s *FileSource) readFailedLocked(err error) error {
	if s.last.Generation > 0 {
		if s.last.Err == nil {
			s.log.Error("cannot read source file; keeping its last good content", zap.Error(err))
		} else {
			s.log.Debug("source file still unreadable", zap.Error(err))
		}
	}
	s.haveSig = false
	s.last.Err = err
	s.last.Time = s.opts.Clock.Now()
	return err
}
