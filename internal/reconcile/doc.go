// Package reconcile makes the kernel match a proxy.Desired, one family per Reconciler.
//
// A sync compares desired state with a model and applies the difference as a Plan (its
// fields are in the order the kernel needs). Sync, the incremental sync, compares only the
// objects a change touched (diffScoped) with the model of what was applied last, so it never
// reads the kernel. A full sync compares everything with a Read of the kernel (BeginRead and
// ReadKernel, which may run without the caller's lock while incremental syncs go on; see
// Read) and counts what changed behind kipvs's back as drift; there is one full-sync
// algorithm, the Pass, in steps of StepSize objects: FullSync and FullSyncFrom run one to its
// end under the caller's lock, RunPasses runs the periodic ones with the lock released
// between steps. owns decides which kernel objects are kipvs's (the ownership rule); apply
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
// # Life cycle of a kernel object
//
// Every virtual server, real server, set member, VIP address, set and the ruleset goes
// through the same states. "Applied" is what the model (Reconciler.applied) records; the
// kernel itself is only read by a full sync.
//
//	desired ──diff──▶ planned ──apply──▶ applied ──changed behind kipvs's back──▶ drifted
//	                   ▲    │               ▲                                        │
//	                   │    │ refused       └──────── the next full sync repairs ────┘
//	                   │    ▼
//	                   └── failed (ObjectStatus: error, attempts, NextRetry; retried with backoff)
//
// A failed object's kernel state is unknown until a retry succeeds; every other object
// keeps its model, so one refusal never forces a full sync.
//
// # Glossary
//
//   - desired state: what proxy.Desired says the kernel must hold, built from the Services.
//   - model (applied): what this Reconciler last applied successfully, per object; an
//     incremental Sync diffs against it and never reads the kernel.
//   - Read: one reading of the kernel (the IPVS table, the dummy link's addresses, the sets
//     and the ruleset), taken without the caller's lock.
//   - journal: while a Read is in progress, the list of objects incremental syncs touched
//     meanwhile; for those the model is newer than the Read, so the model wins.
//   - ownership rule (owns): a virtual server is kipvs's, and may be changed or deleted, when
//     it is desired, when this process created it, or when a kipvs object vouches for it;
//     any other virtual server is left alone.
//   - vouchers (vouch): the kernel objects whose presence makes a virtual server kipvs's by
//     that rule: its VIP on the dummy link and its members of the KUBE-* sets. apply keeps
//     them while the virtual server's delete has not succeeded.
//   - settle: record an apply's outcome: each object of the plan that did not fail is
//     applied and loses its status; each that failed gets or updates an ObjectStatus.
//   - drift: the difference a full sync counts between the model and the kernel, by kind;
//     the full sync's plan repairs it.
//   - Pass: the periodic full sync done in steps of a bounded number of objects, so that no
//     step holds the daemon's lock for long (see pass.go; the steps: passsteps.go).
//   - draining: a real server removed from the desired state, kept at weight 0 until its
//     connections end (Drain).
//
// Drain deletes drained real servers once their connections end. PlanCleanup and
// ExecuteCleanup remove everything kipvs (or kube-proxy) owns, for `kipvs cleanup`.
package reconcile
