// Package healthcheck serves the per-Service health checks of externalTrafficPolicy=Local
// LoadBalancer Services on their healthCheckNodePort, as kube-proxy does: a load balancer
// asks every node and sends traffic only to nodes that answer 200, i.e. that have a local
// endpoint and a healthy proxy.
package healthcheck
