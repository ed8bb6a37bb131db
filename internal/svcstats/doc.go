// Package svcstats exports IPVS's traffic counters per Service port: a prometheus.Collector
// that, at scrape time, reads the counters of every virtual server kipvs programs (and of
// their real servers) and attributes them to the Service port, IP family and VIP kind the
// daemon programmed each virtual server for.
//
// Nothing here runs on the sync path. A scrape makes one service dump (both families), so
// its cost grows with the number of virtual servers, not real servers. IPVS keeps active and
// inactive connection counts per real server only, and has no dump of all real servers at
// once, so the two connection gauges come from the last read of the whole table the
// daemon's full syncs make anyway (Connections: at most syncPeriod old; none before the
// first). With endpoint metrics on, a scrape also dumps the real servers of every kipvs
// virtual server (one request each), and every series, gauges included, is that scrape's.
// The reads are bounded by a timeout. The collector writes the traffic families itself
// (Gatherer merges them with the registry's), already sorted, so a scrape pays no
// per-series registry checks for its tens of thousands of series. On timeout or error the scrape exposes no per-Service series at all (a partial
// sum would look like a counter reset) and kipvs_service_stats_scrape_errors_total counts
// the failure.
//
// Metrics (labels namespace, service, port, protocol, ip_family, vip_kind):
//
//	kipvs_service_connections_total             connections IPVS scheduled
//	kipvs_service_packets_total{direction}      packets, direction "in" (client to endpoint) or "out"
//	kipvs_service_bytes_total{direction}        bytes, likewise
//	kipvs_service_active_connections            established connections (sum over real servers)
//	kipvs_service_inactive_connections          other connections IPVS still tracks
//
// The counters are the virtual servers' own (they keep counting traffic to real servers
// since removed) summed over the virtual servers of one (Service port, family, VIP kind),
// e.g. every node address of a NodePort. A virtual server that goes away (a node address
// removed, a Service port recreated) takes its counts with it, which Prometheus sees as a
// counter reset.
//
// At most Options.MaxServices label sets (default DefaultMaxServices, 140,000 series) are
// exported per scrape, the first in label order; the rest are dropped and counted in
// kipvs_service_stats_dropped_total (one Service may have 32,767 ports). The text path
// writes as it goes, a family at a time in chunks, never the whole body in one buffer.
//
// With Options.Endpoints, the same five families are exported per real server as
// kipvs_endpoint_* with an extra endpoint label (ip:port), summed over the virtual servers
// of the Service port, family and kind. At most Options.MaxEndpoints endpoint label sets
// (default 10000, so at most 70000 series) are exported per scrape, the first in the order
// of the virtual servers (address, port, protocol) and real servers; the rest are dropped
// and counted in kipvs_endpoint_stats_dropped_total.
package svcstats
