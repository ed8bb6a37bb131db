package vm

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers: a child
// process's output or a VM console, collected for diagnostics while it runs.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
