package faulty

import "sync"

// Switch is what a fake embeds to take an Injector: its SetFaulty. Which requests the fake
// asks about, as mutations or reads, is documented on the fake's type. Switch has its own
// lock, so a fake may use it with its own lock held.
type Switch struct {
	mu sync.Mutex
	in *Injector
}

// SetFaulty makes the fake fail requests at random as in decides (nil: never).
func (s *Switch) SetFaulty(in *Injector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.in = in
}

// Injector is the Injector set (nil: none; a nil *Injector fails nothing).
func (s *Switch) Injector() *Injector {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in
}

// Hook is what a fake embeds to take a fault hook of its own signature F (a func type whose
// non-nil result fails the request): its SetFault. A fake asks the hook before its
// Injector. Hook has its own lock, so a fake may use it with its own lock held.
type Hook[F any] struct {
	mu sync.Mutex
	fn F
}

// SetFault installs fn as the fault hook (nil: removes it).
func (h *Hook[F]) SetFault(fn F) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fn = fn
}

// Fault is the hook installed (nil: none).
func (h *Hook[F]) Fault() F {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fn
}
