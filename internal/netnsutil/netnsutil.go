package netnsutil

import (
	"fmt"
	"os/exec"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn with the current OS thread inside ns. A closed or invalid handle (netns.None())
// means "the current namespace": fn runs without switching.
func Do(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: get current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: enter %s: %w", ns, err)
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in the wrong namespace: keep it locked so the runtime
		// destroys it when the goroutine exits instead of reusing it.
		return fmt.Errorf("netns: return to original namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Run runs cmd to completion inside ns: the child is forked from a thread inside ns and
// so starts there; waiting for it needs no namespace.
func Run(ns netns.NsHandle, cmd *exec.Cmd) error {
	if err := Do(ns, cmd.Start); err != nil {
		return err
	}
	return cmd.Wait()
}
