package filesource

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/kipvs/kipvs/internal/watch"
)

// defaultPollInterval is how often Source checks its file when no interval is given.
const defaultPollInterval = time.Second

// defaultSettleInterval is how long a changed file must stay unchanged before it is read,
// when no interval is given.
const defaultSettleInterval = time.Second

// defaultMaxFileSize bounds the source file when no bound is given.
const defaultMaxFileSize int64 = 64 << 20

// racyWindow: a file modified within this long of our read may change again without its
// mtime moving (coarse filesystem timestamps), so it is re-read until it is older.
const racyWindow = 2 * time.Second

// Options configures New.
type Options struct {
	// Path of the stream (--kipvs-source-file). Required.
	Path string
	// NodeName selects the Node object of the file to use as this node's Node (optional:
	// without it, or without a matching Node in the file, Node() is nil).
	NodeName string
	// PollInterval between checks of the file's metadata. Default defaultPollInterval.
	PollInterval time.Duration
	// SettleInterval: a changed file is read only once its identity, size, mtime and ctime
	// have been seen unchanged for this long, so that a file being rewritten in place is not
	// read half-written. Checked at each poll, so the delay is at least one PollInterval.
	// Default defaultSettleInterval.
	SettleInterval time.Duration
	// MaxFileSize: a larger file is refused (the last good revision stays). Default
	// defaultMaxFileSize.
	MaxFileSize int64
	// Clock drives polling, settling and timestamps. Default: real.
	Clock clock.WithTicker
	// Logger is required.
	Logger *zap.Logger
}

// Metrics are the metrics a Source keeps up to date; any may be nil.
type Metrics struct {
	// ReloadErrors counts rejected revisions and failures to read the file
	// (kipvs_source_file_reload_errors_total).
	ReloadErrors prometheus.Counter
	// LastGood is set to the time the latest good revision was applied
	// (kipvs_source_file_last_good_timestamp_seconds).
	LastGood prometheus.Gauge
	// SkippedObjects counts the objects of applied revisions that were skipped
	// (kipvs_source_errors_total{source="file"}).
	SkippedObjects prometheus.Counter
}

// LoadResult describes the latest read of the source file.
type LoadResult struct {
	Path string
	// Time of the latest read attempt that found changed content or failed.
	Time time.Time
	// Generation counts the reads whose content was applied (the first successful read is 1).
	Generation uint64
	// LastGood is when the revision in effect was applied (zero before the first one).
	LastGood time.Time
	// ReloadErrors counts the failures to read the file and the rejected revisions (each
	// distinct failure once).
	ReloadErrors uint64
	// Counts of objects applied by the latest applied read.
	Services, EndpointSlices, ServiceCIDRs int
	Node                                   bool
	// Issues of the latest applied read: objects skipped or replaced, with document index.
	Issues []DecodeIssue
	// Err is set while the file cannot be read or its latest revision is rejected; the last
	// good revision stays in effect.
	Err error
}

// Source serves Services, EndpointSlices, an optional Node and optional ServiceCIDRs
// from a YAML or JSON stream in a file, and re-reads the file when it changes.
//
// Change detection polls the file's metadata (device, inode, size, mtime, ctime) every
// PollInterval. A changed file is read once that metadata has stayed the same for
// SettleInterval, and the read is discarded if the metadata moved while it ran: a file
// rewritten in place (truncated, then written) is not read half-written. A file modified
// less than two seconds before it was read is re-read at the next poll as well, since a
// second write within the filesystem's timestamp granularity would leave the metadata
// unchanged. Re-read content is compared by SHA-256, so an unchanged file causes no reload.
// Objects are defaulted as the apiserver would (service type, protocols, target ports,
// clusterIPs/ipFamilies, traffic policies, namespace "default"...), since hand-written files
// rarely spell those out.
//
// A revision is applied whole or not at all. It is rejected, and the last good one stays in
// effect, when it does not parse, when it is empty (0 bytes, or only blank lines and
// comments: what a file truncated by an in-place rewrite looks like; an explicit empty list
// means "no Services"), when none of its objects is usable, or when the file is larger than
// MaxFileSize or not a regular file. An object that parses but is wrong is skipped alone.
// Until a first revision has been applied the source is not synced, so the consumer touches
// nothing. The supported way to update the file is an atomic rename: write a temporary file
// in the same directory, then rename it over the path.
type Source struct {
	*watch.Store
	replace watch.Replacer
	log     *zap.Logger
	opts    Options
	dec     *decoder
	started atomic.Bool
	done    chan struct{}

	mu      sync.Mutex // serialises reads and guards the fields below
	sig     fileSig    // of the latest content read
	haveSig bool
	racy    bool
	hash    [sha256.Size]byte // of the latest content read
	hashErr error             // why that content was rejected, nil if it was applied
	// candidate is the metadata last seen, since candidateSince: the file is read once it
	// has stayed the same for SettleInterval.
	candidate      fileSig
	haveCandidate  bool
	candidateSince time.Time
	last           LoadResult
	skipped        uint64 // objects skipped by applied revisions, for SetMetrics
	metrics        Metrics
}

var _ watch.Source = (*Source)(nil)

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

// New checks opts and returns an unstarted source.
func New(opts Options) (*Source, error) {
	var errs []error
	if opts.Path == "" {
		errs = append(errs, errors.New("filesource: Options.Path is required"))
	}
	if opts.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("filesource: Options.PollInterval %v is negative", opts.PollInterval))
	}
	if opts.SettleInterval < 0 {
		errs = append(errs, fmt.Errorf("filesource: Options.SettleInterval %v is negative", opts.SettleInterval))
	}
	if opts.MaxFileSize < 0 {
		errs = append(errs, fmt.Errorf("filesource: Options.MaxFileSize %d is negative", opts.MaxFileSize))
	}
	if opts.Logger == nil {
		errs = append(errs, errors.New("filesource: Options.Logger is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.SettleInterval == 0 {
		opts.SettleInterval = defaultSettleInterval
	}
	if opts.MaxFileSize == 0 {
		opts.MaxFileSize = defaultMaxFileSize
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	dec, err := newDecoder()
	if err != nil {
		return nil, err
	}
	log := opts.Logger.With(zap.String("source", "file"), zap.String("path", opts.Path))
	st, replace := watch.NewStore(log, opts.Clock)
	return &Source{
		Store:   st,
		replace: replace,
		log:     log,
		opts:    opts,
		dec:     dec,
		done:    make(chan struct{}),
		last:    LoadResult{Path: opts.Path},
	}, nil
}

// SetMetrics makes the source keep m up to date, starting with what happened before the
// call (the source may be started before the metrics exist). Safe to call at any time.
func (s *Source) SetMetrics(m Metrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metrics = m
	if m.ReloadErrors != nil {
		m.ReloadErrors.Add(float64(s.last.ReloadErrors))
	}
	if m.LastGood != nil && !s.last.LastGood.IsZero() {
		m.LastGood.Set(unixSeconds(s.last.LastGood))
	}
	if m.SkippedObjects != nil {
		m.SkippedObjects.Add(float64(s.skipped))
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Start checks the file (an error if it is missing, unreadable, not a regular file or over
// MaxFileSize) and polls it until ctx is cancelled. The source becomes synced when the first
// good revision has settled and been applied, one SettleInterval after Start at the
// earliest; an empty or broken file keeps it unsynced (logged, and retried at every change).
func (s *Source) Start(ctx context.Context) error { return s.start(ctx, nil) }

// start is Start; afterPoll, if not nil (tests), runs after every poll of the background
// loop.
func (s *Source) start(ctx context.Context, afterPoll func()) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("filesource: Source started twice")
	}
	if err := s.check(); err != nil {
		close(s.done)
		return err
	}
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
				if afterPoll != nil {
					afterPoll()
				}
			}
		}
	}()
	return nil
}

// check makes sure, before anything is started, that the path is a regular file that can be
// opened and is not too big, and starts its settle interval.
func (s *Source) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Clock.Now()
	fi, err := s.statLocked()
	if err == nil {
		var f *os.File
		if f, fi, err = s.openLocked(); err == nil {
			_ = f.Close()
		}
	}
	if err != nil {
		s.last.Err, s.last.Time = err, now // Start fails: the caller reports it
		return err
	}
	s.settledLocked(sigOf(fi), now)
	s.log.Info("waiting for the source file to settle before reading it", zap.Duration("settle", s.opts.SettleInterval))
	return nil
}

// Done is closed once the polling goroutine has exited after ctx was cancelled.
func (s *Source) Done() <-chan struct{} { return s.done }

// LastResult returns the outcome of the latest read.
func (s *Source) LastResult() LoadResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.last
	r.Issues = slices.Clone(r.Issues)
	return r
}

// reload reads the file if its metadata changed (or force) and has settled, and applies it
// if its content changed (or force) and is a good revision. It reports whether new content
// was applied. A failure keeps the last good revision and is returned (and logged once).
func (s *Source) reload(force bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Clock.Now()

	fi, err := s.statLocked()
	if err != nil {
		s.haveSig = false
		return false, s.failLocked(now, err)
	}
	sig := sigOf(fi)
	if !force && s.haveSig && sig == s.sig && !s.racy {
		s.settledLocked(sig, now)
		return false, nil
	}
	if !s.settledLocked(sig, now) {
		s.log.Debug("source file changed; waiting for it to settle", zap.Int64("size", sig.size), zap.Time("mtime", sig.mtime))
		return false, nil
	}
	data, after, err := s.readLocked(sig)
	if err != nil {
		s.haveSig = false
		return false, s.failLocked(now, err)
	}
	if after != sig { // written while we opened or read it: wait for it to settle again
		s.candidate, s.candidateSince = after, now
		s.log.Debug("source file changed while being read; waiting for it to settle")
		return false, nil
	}
	s.sig, s.haveSig = sig, true
	s.racy = now.Sub(sig.mtime) < racyWindow
	h := sha256.Sum256(data)
	if !force && h == s.hash {
		if s.hashErr != nil {
			return false, s.failLocked(now, s.hashErr)
		}
		if s.last.Err != nil {
			s.log.Info("source file is usable again; its content is unchanged")
			s.last.Err = nil
		}
		return false, nil
	}
	s.hash = h

	res := s.dec.decode(s.opts.Path, data, s.opts.NodeName)
	if err := res.revisionError(s.opts.Path); err != nil {
		s.hashErr = err
		return false, s.failLocked(now, err)
	}
	s.hashErr = nil
	for _, is := range res.issues {
		s.log.Warn("skipping object of source file",
			zap.Int("document", is.Document), zap.Int("line", is.Line), zap.Int("item", is.Item),
			zap.String("object", is.Object), zap.Error(is.Err))
	}
	if s.last.Err != nil {
		s.log.Info("source file is usable again", zap.NamedError("previousError", s.last.Err))
	}
	s.replace.Replace(res.state)
	s.skipped += uint64(len(res.issues))
	s.last = LoadResult{
		Path:           s.opts.Path,
		Time:           now,
		Generation:     s.last.Generation + 1,
		LastGood:       now,
		ReloadErrors:   s.last.ReloadErrors,
		Services:       len(res.state.Services),
		EndpointSlices: len(res.state.Slices),
		ServiceCIDRs:   len(res.state.ServiceCIDRs),
		Node:           res.state.Node != nil,
		Issues:         res.issues,
	}
	if m := s.metrics.LastGood; m != nil {
		m.Set(unixSeconds(now))
	}
	if m := s.metrics.SkippedObjects; m != nil && len(res.issues) > 0 {
		m.Add(float64(len(res.issues)))
	}
	s.log.Info("loaded source file",
		zap.Uint64("generation", s.last.Generation), zap.Int("services", s.last.Services),
		zap.Int("endpointSlices", s.last.EndpointSlices), zap.Bool("node", s.last.Node),
		zap.Int("serviceCIDRs", s.last.ServiceCIDRs), zap.Int("issues", len(res.issues)))
	return true, nil
}

// settledLocked records sig as the metadata seen now and reports whether it has been the
// same for SettleInterval.
func (s *Source) settledLocked(sig fileSig, now time.Time) bool {
	if !s.haveCandidate || sig != s.candidate {
		s.candidate, s.candidateSince, s.haveCandidate = sig, now, true
	}
	return now.Sub(s.candidateSince) >= s.opts.SettleInterval
}

// statLocked stats the path (following symlinks, as a ConfigMap volume's files are) and
// refuses anything but a regular file of at most MaxFileSize bytes, without opening it.
func (s *Source) statLocked() (os.FileInfo, error) {
	fi, err := os.Stat(s.opts.Path)
	if err != nil {
		return nil, fmt.Errorf("source file: %w", err)
	}
	return fi, s.checkFileInfo(fi)
}

func (s *Source) checkFileInfo(fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("source file %s is %s, not a regular file", s.opts.Path, describeFileType(fi.Mode()))
	}
	if fi.Size() > s.opts.MaxFileSize {
		return fmt.Errorf("source file %s is %d bytes, over the %d-byte limit", s.opts.Path, fi.Size(), s.opts.MaxFileSize)
	}
	return nil
}

func describeFileType(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	default:
		return fmt.Sprintf("of type %v", m.Type())
	}
}

// openLocked opens the file without blocking (a FIFO swapped in after the stat would
// otherwise block the open until a writer appears) and checks what it opened.
func (s *Source) openLocked() (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(s.opts.Path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("source file: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = s.checkFileInfo(fi)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readLocked reads the file, bounded by MaxFileSize. want is the metadata the caller found
// settled; after is the metadata of the file read, after the read: the content is a
// consistent revision only when they are equal.
func (s *Source) readLocked(want fileSig) (data []byte, after fileSig, err error) {
	f, fi, err := s.openLocked()
	if err != nil {
		return nil, fileSig{}, err
	}
	defer f.Close()
	if got := sigOf(fi); got != want {
		return nil, got, nil // replaced or rewritten since the stat
	}
	data, err = io.ReadAll(io.LimitReader(f, s.opts.MaxFileSize+1))
	if err != nil {
		return nil, fileSig{}, fmt.Errorf("source file %s: %w", s.opts.Path, err)
	}
	if int64(len(data)) > s.opts.MaxFileSize {
		return nil, fileSig{}, fmt.Errorf("source file %s grew over the %d-byte limit while being read", s.opts.Path, s.opts.MaxFileSize)
	}
	fi, err = f.Stat()
	if err != nil {
		return nil, fileSig{}, fmt.Errorf("source file %s: %w", s.opts.Path, err)
	}
	after = sigOf(fi)
	if int64(len(data)) != after.size {
		after.size = -1 // read a different length than the file has: not consistent
	}
	return data, after, nil
}

// failLocked records err as the current failure; the last good revision stays in effect.
// Each distinct failure is logged and counted once.
func (s *Source) failLocked(now time.Time, err error) error {
	if s.last.Err == nil || s.last.Err.Error() != err.Error() {
		s.last.ReloadErrors++
		if m := s.metrics.ReloadErrors; m != nil {
			m.Inc()
		}
		if s.last.Generation > 0 {
			s.log.Warn("source file not applied; keeping its last good revision", zap.Error(err),
				zap.Uint64("generation", s.last.Generation), zap.Time("lastGood", s.last.LastGood))
		} else {
			s.log.Warn("source file not usable; Services are not programmed until it is", zap.Error(err))
		}
	} else {
		s.log.Debug("source file still not usable", zap.Error(err))
	}
	s.last.Err = err
	s.last.Time = now
	return err
}
