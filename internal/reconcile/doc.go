// Package reconcile makes the kernel match a proxy.Desired, one family per Reconciler.
//
// A sync compares desired state with a model and applies the difference as a Plan (its
// fields are in the order the kernel needs; diffAll compares everything, diffScoped only
// the objects a change touched). FullSync and FullSyncFrom take the model from a Read of the
// kernel (BeginRead and ReadKernel, which may run without the caller's lock while
// incremental syncs go on; see Read) and count what changed behind kipvs's back as drift.
// Sync compares with the model of what was applied last, so an incremental sync never reads
// the kernel. observe decides which kernel objects are kipvs's (the ownership rule); apply
// runs a Plan through the adapters and updates the model with what succeeded.
//
// Every virtual server, set member, address, set and the ruleset that the kernel refused
// has an ObjectStatus (Failed): its error, attempts and retry time. Its model is unknown
// until a retry reads it back (a virtual server) or re-applies it idempotently (a member,
// an address); the rest of the model stays, so one failing object never forces a full
// sync: Sync retries the objects that are due (NextRetry, RetryDue) or that a change names,
// with exponential backoff, and the periodic full sync stays the safety net for drift.
// Only a failed kernel read or dummy link needs a full sync (NeedsFull).
//
// Drain deletes drained real servers once their connections end. PlanCleanup and
// ExecuteCleanup remove everything kipvs (or kube-proxy) owns, for `kipvs cleanup`.
package reconcile
