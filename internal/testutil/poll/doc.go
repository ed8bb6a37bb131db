// Package poll waits for a condition on state a test cannot be told about: another
// goroutine's, another process's, the kernel's. It checks the condition at once, then again
// after 1 ms, doubling the pause up to MaxInterval, until the condition holds or a time
// limit passes. The pause follows each check, so a slow check (a command, a scrape) never
// runs back to back with the next one.
//
// It waits for an outcome; it never stands in for synchronisation (a channel, an injected
// clock) where one exists.
package poll
