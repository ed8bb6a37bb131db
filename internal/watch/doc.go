// Package watch supplies the proxy with the cluster state it programs: the proxied Services
// with their EndpointSlices, this node's Node object and the service CIDRs.
//
// Two sources implement [Source]: [APISource] watches the Kubernetes API through client-go
// informers, and the file source (package filesource, which imports watch, never the other
// way) reads a static YAML/JSON stream from a file and re-reads it when it changes. Both
// feed the same change-tracking store (the file source through [Store] and [Replacer]), so
// the consumer sees identical semantics:
//
//   - Records are immutable. A [ServiceInfo] is replaced, never modified, when its Service or
//     one of its EndpointSlices changes. The API objects inside are shared with the informer
//     caches and must be treated as read-only.
//   - Nothing is handed out before the source has synced: [Source.Pending] and [Source.All]
//     return [ErrNotSynced] until the initial state is complete, so a half-filled cache can
//     never be mistaken for "these services were deleted".
//   - [Source.Changed] fires (capacity 1, coalescing) whenever something became dirty after
//     sync; [Source.Pending] hands out only what changed since the previous call, so an
//     incremental sync costs work proportional to the change.
//
// Filtering follows kube-proxy: Services labelled service.kubernetes.io/service-proxy-name
// (any value), headless Services (clusterIP None or unset) and ExternalName Services are not
// proxied, and a Service that stops being proxied is reported as deleted. EndpointSlices are
// attached to their Service through the kubernetes.io/service-name label; slices whose
// Service is unknown are kept so that a later Service add finds them.
package watch
