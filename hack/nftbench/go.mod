module github.com/kipvs/kipvs/hack/nftbench

go 1.26

require (
	github.com/google/nftables v0.3.0
	github.com/mdlayher/netlink v1.7.3-0.20250113171957-fbb4dce95f42
	sigs.k8s.io/knftables v0.0.21
)

require (
	github.com/google/go-cmp v0.6.0 // indirect
	github.com/mdlayher/socket v0.5.0 // indirect
	golang.org/x/net v0.33.0 // indirect
	golang.org/x/sync v0.6.0 // indirect
	golang.org/x/sys v0.28.0 // indirect
)
