// Package netnsutil runs code and commands inside a network namespace given by handle,
// without moving any other goroutine: the calling goroutine is locked to its OS thread,
// the thread enters the namespace, and it returns to its original namespace afterwards.
package netnsutil
