// Package runner schedules syncs: it coalesces change notifications into incremental syncs
// no closer together than a minimum interval, runs a full sync at least every maximum
// interval, retries a failed sync as a full sync with exponential backoff, and runs an
// incremental sync when the SyncFunc's own per-object retries are due. Time comes
// from an injected clock so tests step it instead of sleeping.
package runner
