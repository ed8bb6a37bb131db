# kipvs — see README.md. `make test` is what CI runs (through .ci/run).
SHELL        := /bin/bash
GO           ?= go
CACHE        ?= $(CURDIR)/.cache
VMCACHE      := $(CACHE)/vm
BIN          := $(CURDIR)/bin
# Evaluated once: a commit during a long target must not rename the image it built.
# The release this tree is: the VERSION file, the one source of the version the binary reports,
# make release's artifacts and deploy/'s image tag (deploy's TestImageTagIsVersion keeps them equal).
ifeq ($(origin VERSION),undefined)
VERSION      := $(shell cat $(CURDIR)/VERSION 2>/dev/null || echo dev)
endif
GIT_DESCRIBE := $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
GIT_COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
GIT_TREE_STATE ?= $(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),dirty,clean)
# The build date stamped into bin/kipvs is SOURCE_DATE_EPOCH when given (environment or
# command line), else the last commit's time, never the clock: the same commit builds the
# same binary (-trimpath, the same Go toolchain), and make image the same digest.
ifneq ($(filter environment command,$(origin SOURCE_DATE_EPOCH)),)
BUILD_EPOCH  := $(SOURCE_DATE_EPOCH)
else
BUILD_EPOCH  := $(or $(shell git log -1 --format=%ct 2>/dev/null),0)
endif
BUILD_DATE   ?= $(shell date -u -d @$(BUILD_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
VPKG         := github.com/kipvs/kipvs/internal/version
LDFLAGS      := -X $(VPKG).Version=$(VERSION) -X $(VPKG).GitCommit=$(GIT_COMMIT) -X $(VPKG).GitTreeState=$(GIT_TREE_STATE) -X $(VPKG).BuildDate=$(BUILD_DATE)
# Packages that hold kernel tests (files tagged `kernel`); they run inside the VM.
KERNEL_PKGS  ?= $(shell grep -rl --include='*_test.go' '^//go:build.*\bkernel\b' internal cmd 2>/dev/null | xargs -r -n1 dirname | sort -u)
KERNEL_TIMEOUT ?= 25m
K8SBIN       := $(CACHE)/k8s
E2EBIN       := $(CACHE)/e2e-bin
E2E_TIMEOUT  ?= 40m
E2E_ARGS     ?=
NFTBENCH_N   ?= 10000
KUSTOMIZE_VERSION := v5.8.1
# helm and promtool, built from their Go modules into TOOLS (one directory per version).
TOOLS        := $(CACHE)/tools
HELM_VERSION := v3.21.4
HELM         := $(TOOLS)/helm-$(HELM_VERSION)/helm
PROMTOOL_VERSION := $(shell sed -n 's|^[[:space:]]*\(require \)\{0,1\}github.com/prometheus/prometheus \(v[^ ]*\).*|\2|p' hack/promtool/go.mod)
PROMTOOL     := $(TOOLS)/promtool-$(PROMTOOL_VERSION)/promtool
# make install: DESTDIR-aware; the unit goes where systemd looks for PREFIX's units.
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
SYSCONFDIR   ?= /etc
UNITDIR      ?= $(PREFIX)/lib/systemd/system
# make image: hack/ociimage writes IMAGE_ARCHIVE (an OCI archive named IMAGE) from Debian 12's
# packages (cached in DEBCACHE) and bin/kipvs, no container engine needed; then loads it into
# the first of podman, docker, buildah found (CONTAINER_TOOL=none: none), unless CONTAINER_TOOL
# is given. Every file and the image carry SOURCE_DATE_EPOCH (default: the time of the last
# commit that changed the image definitions, so other commits leave the digests alone).
IMAGE        ?= ghcr.io/kipvs/kipvs:$(VERSION)
IMAGE_ARCHIVE ?= $(BIN)/kipvs-image.oci.tar
PAUSE_ARCHIVE ?= $(BIN)/pause-image.oci.tar
AGNHOST_ARCHIVE ?= $(BIN)/agnhost-image.oci.tar
DEBCACHE     := $(CACHE)/debs
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct -- hack/ociimage hack/pause e2e/k8s 2>/dev/null)
CONTAINER_TOOL ?= $(firstword $(foreach t,podman docker buildah,$(shell command -v $(t) 2>/dev/null)))

.PHONY: release release-qemu all build demo test test-unit test-chart helm promtool monitoring-scrape test-configdiff test-kernel test-e2e e2e-bins deps vm-prepare lint lint-quick bench bench-compare bench-first-sync nftbench fuzz clean install image image-archive image-containerfile image-pause image-agnhost image-jessie-dnsutils image-busybox image-regression-issue-74839 image-distroless-iptables e2e-images ociimage node-bins conformance-bins conformance-selection node-prepare node-smoke node-images image-echo image-kube-proxy conformance conformance-doc image-coredns

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kipvs ./cmd/kipvs

test: deps lint-quick test-unit test-chart test-configdiff test-kernel test-e2e node-smoke

# Boots the VM, runs kipvs on the standalone source e2e/demo/services.yaml with three
# backends in network namespaces, and shows requests to the ClusterIP and ipvsadm -Ln.
demo: deps build vm-prepare
	CGO_ENABLED=0 $(GO) build -o $(BIN)/echo ./e2e/echo
	@$(GO) run ./e2e/vm/cmd/vmrun --cache $(VMCACHE) --timeout 10m --quiet --script e2e/demo/demo.sh

# The demo, then kipvs's /metrics saved into deploy/monitoring/testdata/scrape.txt: the real
# scrape the alerting rules' tests take their series from (deploy/monitoring/README.md).
monitoring-scrape: deps build vm-prepare
	CGO_ENABLED=0 $(GO) build -o $(BIN)/echo ./e2e/echo
	@$(GO) run ./e2e/vm/cmd/vmrun --cache $(VMCACHE) --timeout 10m --quiet --script e2e/demo/scrape.sh \
		--artifacts deploy/monitoring/testdata

test-unit:
	$(GO) test -count=1 ./...

# The config and flag differential (e2e/configdiff): kube-proxy v1.34.10 and kipvs run with
# the same files and flags plus --write-config-to, on the host (no VM, no root); seconds.
test-configdiff: e2e-bins build
	KIPVS_KUBE_PROXY_BIN=$(K8SBIN)/kube-proxy KIPVS_BIN=$(BIN)/kipvs $(GO) test -count=1 -tags oracle ./e2e/configdiff

# Boots the Debian kernel under qemu/TCG once and runs every kernel test binary in it.
test-kernel: vm-prepare
	@set -e; bindir=$$(mktemp -d $(VMCACHE)/bin.XXXXXX); trap 'rm -rf '$$bindir EXIT; tests=""; \
	for p in $(KERNEL_PKGS); do \
		n=$$(echo $$p | tr / _); \
		echo "build kernel tests: ./$$p"; \
		CGO_ENABLED=0 $(GO) test -c -tags kernel -o $$bindir/$$n.test ./$$p; \
		tests="$$tests --test $$bindir/$$n.test"; \
	done; \
	$(GO) run ./e2e/vm/cmd/vmrun --cache $(VMCACHE) --timeout $(KERNEL_TIMEOUT) $$tests

# The oracle of the differential tests: kube-proxy v1.34.10, with the version it reports.
KPVER        := k8s.io/component-base/version
KUBE_PROXY_LDFLAGS := -X $(KPVER).gitVersion=v1.34.10 -X $(KPVER).gitMajor=1 -X $(KPVER).gitMinor=34 -X $(KPVER).gitTreeState=clean

# A real etcd and kube-apiserver, and kube-proxy, built from the nested module e2e/k8s (k8s.io/kubernetes
# stays out of the main module). Cold: several minutes; afterwards the Go build cache
# makes this a few seconds.
e2e-bins:
	@mkdir -p $(K8SBIN)
	cd e2e/k8s && CGO_ENABLED=0 $(GO) build -o $(K8SBIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	cd e2e/k8s && CGO_ENABLED=0 $(GO) build -o $(K8SBIN)/etcd go.etcd.io/etcd/server/v3
	cd e2e/k8s && CGO_ENABLED=0 $(GO) build -ldflags '$(KUBE_PROXY_LDFLAGS)' -o $(K8SBIN)/kube-proxy k8s.io/kubernetes/cmd/kube-proxy

# The node's binaries (e2e/node, docs/conformance.md): kubelet, kube-controller-manager,
# kube-scheduler and kubectl v1.34.10 from the same nested module, into their own directory.
NODEBIN      := $(CACHE)/node-bin
K8S_LDFLAGS  := $(KUBE_PROXY_LDFLAGS)
node-bins:
	@mkdir -p $(NODEBIN)
	cd e2e/k8s && for b in kubelet kube-controller-manager kube-scheduler kubectl; do \
		echo "build $$b"; \
		CGO_ENABLED=0 $(GO) build -ldflags '$(K8S_LDFLAGS)' -o $(NODEBIN)/$$b k8s.io/kubernetes/cmd/$$b || exit 1; \
	done

# Kubernetes' own e2e suite (docs/conformance-testbed.md, "The suite"): e2e.test from k8s.io/kubernetes/test/e2e
# v1.34.10, a test binary built inside the nested module (go test -c of a dependency's package), with
# the same version stamping so it reports v1.34.10. agnhost, the image its tests run, is make image-agnhost.
conformance-bins:
	@mkdir -p $(NODEBIN)
	cd e2e/k8s && CGO_ENABLED=0 $(GO) test -c -ldflags '$(K8S_LDFLAGS)' -o $(NODEBIN)/e2e.test k8s.io/kubernetes/test/e2e
	cd e2e/k8s && CGO_ENABLED=0 $(GO) build -o $(NODEBIN)/ginkgo github.com/onsi/ginkgo/v2/ginkgo

# The suite's default selection (docs/conformance-testbed.md, "The suite"): every [sig-network] test less
# what needs a feature, a cloud, a load balancer, IPv6, SCTP or rewrites CoreDNS's ConfigMap (tests that need
# SSH, more nodes or zones skip themselves).
CONFORMANCE_FOCUS ?= \[sig-network\]
CONFORMANCE_SKIP  ?= \[Feature:|\[Flaky\]|LoadBalancer|load.balancer|LB.health.check|GCE|NetworkPolicy|DualStack|SCTP|DNS configMap
CONFORMANCE_SELECTION := e2e/node/testdata/conformance-selection.txt
# The tests the selection picks, by the suite's own dry run (no cluster needed), into CONFORMANCE_SELECTION.
conformance-selection:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(NODEBIN)/e2e.test --provider=skeleton --ginkgo.dry-run --ginkgo.no-color --report-dir="$$tmp" \
		--ginkgo.focus='$(CONFORMANCE_FOCUS)' --ginkgo.skip='$(CONFORMANCE_SKIP)' >"$$tmp/log" 2>&1 || { cat "$$tmp/log" >&2; exit 1; } && \
	{ echo "# $$($(NODEBIN)/e2e.test --version) selection, by: make conformance-selection (e2e.test --ginkgo.dry-run --ginkgo.focus='$(CONFORMANCE_FOCUS)' --ginkgo.skip='$(CONFORMANCE_SKIP)', the passed testcases of junit_01.xml)"; \
	  sed -n 's/.*<testcase name="\[It\] \(.*\)" classname=.* status="passed".*/\1/p' "$$tmp/junit_01.xml" | sort; } >$(CONFORMANCE_SELECTION)
	@echo "$(CONFORMANCE_SELECTION): $$(grep -vc '^#' $(CONFORMANCE_SELECTION)) tests"

# API-level end-to-end tests: etcd + kube-apiserver run natively on the host (127.0.0.1),
# the tests and kipvs run inside the VM, which reaches only the apiserver.
test-e2e: vm-prepare e2e-bins build image-archive $(BIN)/kustomize
	@mkdir -p $(E2EBIN)
	CGO_ENABLED=0 $(GO) test -c -tags e2e -o $(E2EBIN)/e2e.test ./e2e/tests
	CGO_ENABLED=0 $(GO) test -c -tags e2e -o $(E2EBIN)/deploy.test ./e2e/deploy
	CGO_ENABLED=0 $(GO) build -o $(E2EBIN)/echo ./e2e/echo
	$(GO) run ./e2e/cluster/cmd/e2erun --k8s-bin $(K8SBIN) --state $(CACHE)/e2e --vm-cache $(VMCACHE) \
		--timeout $(E2E_TIMEOUT) --env KIPVS_BIN=$(BIN)/kipvs --env KIPVS_ECHO_BIN=$(E2EBIN)/echo \
		--env KIPVS_KUSTOMIZE=$(BIN)/kustomize --env KIPVS_DEPLOY_DIR=$(CURDIR)/deploy --env KIPVS_KUBE_PROXY_BIN=$(K8SBIN)/kube-proxy \
		--env KIPVS_IMAGE_ARCHIVE=$(IMAGE_ARCHIVE) --test $(E2EBIN)/e2e.test --test $(E2EBIN)/deploy.test -- $(E2E_ARGS)

# containerd, runc and the CNI plugins from Debian 12's packages, extracted into the cache
# (nothing is installed on the host).
NODEPKGS     := $(CACHE)/node
node-prepare: deps
	@e2e/node/prepare.sh $(NODEPKGS)

# The real node's smoke (e2e/node, docs/conformance.md): control plane on the host, kubelet +
# containerd in the VM on a tap link (needs root), kipvs installed from charts/kipvs (helm
# template on the host, applied with kubectl; make test-e2e and make conformance apply deploy/
# with kustomize) as the DaemonSet from its imported image, one ClusterIP Service answering
# from a pod through kipvs.
# NODE_ARGS="--until node" (or kipvs) stops after that step; --memory, --timeout, --tap, --host-ip,
# --node-ip: see `go run ./e2e/node/cmd/noderun -h`. NODE_DNS=1 also deploys kube-dns (CoreDNS,
# make image-coredns) after the proxy and resolves a name through it from a pod (about 1 minute more).
# NODE_PROXY=kube-proxy (or --proxy kube-proxy in NODE_ARGS) runs kube-proxy v1.34.10 from
# kubeadm's manifest (e2e/node/manifests/kube-proxy.yaml) in kipvs's place: the reference run.
NODE_ARGS    ?=
NODE_DNS     ?=
NODE_PROXY   ?= $(if $(findstring --proxy kube-proxy,$(NODE_ARGS)),kube-proxy,kipvs)
NODE_PROXY_IMAGES = $(if $(filter kube-proxy,$(NODE_PROXY)),--image $(KUBE_PROXY_ARCHIVE) --kube-proxy-image $(KUBE_PROXY_IMAGE),--image $(IMAGE_ARCHIVE) --kipvs-image $(IMAGE))
node-smoke: vm-prepare node-prepare e2e-bins node-bins node-images $(HELM) $(if $(filter kube-proxy,$(NODE_PROXY)),image-kube-proxy) $(if $(NODE_DNS),image-coredns)
	$(GO) run ./e2e/node/cmd/noderun --k8s-bin $(K8SBIN) --node-bin $(NODEBIN) --node-pkgs $(NODEPKGS) \
		--vm-cache $(VMCACHE) --state $(CACHE)/node-e2e --proxy $(NODE_PROXY) $(NODE_PROXY_IMAGES) --helm $(HELM) \
		--image $(PAUSE_ARCHIVE) --pause-image registry.k8s.io/pause:3.10.1 \
		--image $(ECHO_ARCHIVE) --echo-image $(ECHO_IMAGE) \
		$(if $(NODE_DNS),--image $(COREDNS_ARCHIVE) --coredns-image $(COREDNS_IMAGE)) $(NODE_ARGS)

# Upstream's [sig-network] suite on the real node, against kube-proxy v1.34.10 and kipvs in turn
# (a fresh cluster and VM each), then docs/conformance.md's results from both JUnit reports and
# both /metrics (docs/conformance.md). Needs root; hours on 2 cores, not part of make test.
# CONFORMANCE_PROXY=kipvs|kipvs-nftables|kube-proxy|both (kipvs-nftables: kipvs with --kipvs-filter-backend=nftables), CONFORMANCE_FOCUS / CONFORMANCE_SKIP (the suite's
# --ginkgo.focus / --ginkgo.skip: one test by name works), CONFORMANCE_ARGS (more noderun flags,
# e.g. --suite-arg=--ginkgo.fail-fast), CONFORMANCE_TIMEOUT (each run's limit).
CONFORMANCE_PROXY   ?= both
# Every run directory under CONFORMANCE_RESULTS goes into docs/conformance.md; runs on more
# than one node go into a directory of their own (N-nodes/PROXY), next to the one-node runs.
CONFORMANCE_RESULTS ?= $(CACHE)/conformance
CONFORMANCE_DIR     ?= $(CONFORMANCE_RESULTS)$(if $(filter-out 1,$(CONFORMANCE_NODES)),/$(CONFORMANCE_NODES)-nodes)
CONFORMANCE_TIMEOUT ?= 6h
CONFORMANCE_ARGS    ?=
# CONFORMANCE_NODES=2: a second node (VM) on a host bridge, for the tests that need two.
CONFORMANCE_NODES   ?= 1
CONFORMANCE_IMAGES   = --image $(PAUSE_ARCHIVE) --image $(ECHO_ARCHIVE) --image $(AGNHOST_ARCHIVE) \
	--image $(COREDNS_ARCHIVE) --coredns-image $(COREDNS_IMAGE) \
	$(foreach i,$(CONFORMANCE_SUITE_IMAGES),--image $(BIN)/$(i)-image.oci.tar)
# Of SUITE_IMAGES, what one node runs: the others serve only tests that skip on one node, and
# each image costs its import under TCG (about 2.5 s per MB). Two nodes import them all.
CONFORMANCE_SUITE_IMAGES ?= $(if $(filter 1,$(CONFORMANCE_NODES)),jessie-dnsutils,$(SUITE_IMAGES))
conformance: vm-prepare node-prepare e2e-bins node-bins conformance-bins node-images e2e-images image-kube-proxy
	@case '$(CONFORMANCE_PROXY)' in \
	both) proxies='kube-proxy kipvs';; kipvs|kipvs-nftables|kube-proxy) proxies='$(CONFORMANCE_PROXY)';; \
	*) echo "make conformance: CONFORMANCE_PROXY=$(CONFORMANCE_PROXY): want kipvs, kipvs-nftables, kube-proxy or both" >&2; exit 2;; esac; \
	CGO_ENABLED=0 $(GO) build -o $(BIN)/noderun ./e2e/node/cmd/noderun || exit 1; \
	for p in $$proxies; do \
		echo "make conformance: the $$p run"; \
		$(BIN)/noderun --k8s-bin $(K8SBIN) --node-bin $(NODEBIN) --ginkgo $(NODEBIN)/ginkgo --node-pkgs $(NODEPKGS) \
			--vm-cache $(VMCACHE) --state $(CACHE)/node-e2e --proxy $$p \
			$$(if [ $$p != kube-proxy ]; then echo --image $(IMAGE_ARCHIVE) --kipvs-image $(IMAGE); \
			   else echo --image $(KUBE_PROXY_ARCHIVE) --kube-proxy-image $(KUBE_PROXY_IMAGE); fi) \
			--pause-image registry.k8s.io/pause:3.10.1 --echo-image $(ECHO_IMAGE) $(CONFORMANCE_IMAGES) \
			--timeout $(CONFORMANCE_TIMEOUT) --suite $(NODEBIN)/e2e.test --report-dir $(CONFORMANCE_DIR)/$$p \
			--metrics-out $(CONFORMANCE_DIR)/$$p/metrics.txt --commit $(GIT_DESCRIBE) \
			--nodes $(CONFORMANCE_NODES) --focus '$(CONFORMANCE_FOCUS)' --skip '$(CONFORMANCE_SKIP)' $(CONFORMANCE_ARGS) \
			|| { echo "make conformance: the $$p run failed at the step named above" >&2; exit 1; }; \
	done
	$(MAKE) --no-print-directory conformance-doc

# docs/conformance.md's results from the runs in CONFORMANCE_DIR (e2e/conformance).
conformance-doc:
	$(GO) run ./e2e/conformance/cmd/conformancedoc --results $(CONFORMANCE_RESULTS) --doc docs/conformance.md \
		--notes e2e/conformance/notes.yaml

# The images the node smoke imports into containerd: kipvs's, the pause image, and e2e/echo's.
node-images: image-archive image-pause image-echo

# e2e/echo as an image (/echo), the node smoke's backend and client.
ECHO_ARCHIVE ?= $(BIN)/echo-image.oci.tar
ECHO_IMAGE   := localhost/kipvs-e2e-echo:dev
image-echo: ociimage
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/echo ./e2e/echo
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build echo --input echo=$(BIN)/echo --tag $(ECHO_IMAGE) \
		--out $(ECHO_ARCHIVE) --digest-file $(ECHO_ARCHIVE).digest

# The two ways of driving nf_tables measured on one table, as root in a namespace of its own
# (docs/nftables-backend.md): knftables (the nft program) and google/nftables (netlink).
nftbench:
	cd hack/nftbench && $(GO) build -o $(BIN)/nftbench . && unshare -n $(BIN)/nftbench -n $(NFTBENCH_N)

# kube-proxy v1.34.10 and kipvs side by side (e2e/bench, docs/performance.md): etcd and
# kube-apiserver on the host, BENCH_N ClusterIP Services x BENCH_E endpoints loaded from the host, one
# VM boot per N running each proxy of BENCH_PROXIES in turn on the same objects, on a clean node
# (the clean-up between proxies is checked). BENCH_PROXIES names kube-proxy (IPVS mode),
# kube-proxy-nftables, kube-proxy-iptables (the same binary in those modes), kipvs and kipvs-nftables
# (kipvs with --kipvs-filter-backend=nftables); the default
# is kube-proxy,kipvs. Each proxy's control-plane figures, then its data path: cmd/loadgen in a
# client namespace against a Service created last with echo backends in their own namespaces
# (new TCP connections, kept-alive requests and UDP through the cluster IP, the node port and
# straight to a backend; BENCH_ARGS="--loadgen-workers 4 --loadgen-duration 10s" are the
# defaults), and how held connections and session affinity behave. Results in
# $(BENCH_OUT)/$(BENCH_NAME).json and .svg (BENCH_OUT defaults to .cache/bench); BENCH_DOCS=docs/bench
# copies them there. BENCH_ARGS="--profiles kipvs" (or kube-proxy,kipvs) takes Go profiles (CPU
# over the changes and the idle window, heap) into $(BENCH_OUT)/profiles/$(BENCH_NAME)-PROXY-N/;
# off by default, as the profiler's own memory and CPU count in the profiled proxy's figures.
# About 35 minutes at the defaults; e.g.
# make bench-compare BENCH_N=10000 BENCH_PROXIES=kipvs BENCH_NAME=kipvs-10k.
# BENCH_ARGS=--keep-state starts etcd on the objects an earlier run loaded ($(BENCH_STATE), by
# default .cache/bench/state) rather than loading them again (50,000 Services x 4 take about 45
# minutes to load). BENCH_BIN is where the bench's VM binaries (bench.test, loadgen, echo) are built.
BENCH_N       ?= 500 1000 2000
BENCH_E       ?= 10
BENCH_CHANGES ?= 50
BENCH_PROXIES ?= kube-proxy,kipvs
BENCH_NAME    ?= bench-compare
BENCH_DOCS    ?=
BENCH_ARGS    ?=
BENCH_STATE   ?= $(CACHE)/bench/state
BENCH_OUT     ?= $(CACHE)/bench
BENCH_BIN     ?= $(E2EBIN)
bench-compare: vm-prepare e2e-bins build
	@mkdir -p $(BENCH_BIN)
	CGO_ENABLED=0 $(GO) test -c -tags e2e -o $(BENCH_BIN)/bench.test ./e2e/bench
	CGO_ENABLED=0 $(GO) build -o $(BENCH_BIN)/loadgen ./e2e/bench/cmd/loadgen
	CGO_ENABLED=0 $(GO) build -o $(BENCH_BIN)/echo ./e2e/echo
	$(GO) run ./e2e/bench/cmd/benchcompare --k8s-bin $(K8SBIN) --state $(BENCH_STATE) --vm-cache $(VMCACHE) \
		--out $(BENCH_OUT) --name $(BENCH_NAME) --n "$(BENCH_N)" --e $(BENCH_E) --changes $(BENCH_CHANGES) --proxies $(BENCH_PROXIES) \
		$(if $(BENCH_DOCS),--docs $(BENCH_DOCS)) --test $(BENCH_BIN)/bench.test \
		--env KIPVS_BIN=$(BIN)/kipvs --env KIPVS_KUBE_PROXY_BIN=$(K8SBIN)/kube-proxy \
		--env KIPVS_ECHO_BIN=$(BENCH_BIN)/echo --env KIPVS_BENCH_LOADGEN=$(BENCH_BIN)/loadgen $(BENCH_ARGS)

# kipvs's first sync of FIRSTSYNC_N ClusterIP Services x FIRSTSYNC_E endpoints in the VM, from a
# source file holding bench-compare's objects (no apiserver: loading 50,000 Services into it takes
# half an hour), next to what `ip -batch` and `ipvsadm -R` take for the same VIPs and IPVS table
# in the same boot (e2e/bench/cmd/firstsync; CPU profiles in .cache/bench/firstsync/profiles).
FIRSTSYNC_N ?= 50000
FIRSTSYNC_E ?= 4
FIRSTSYNC_ARGS ?=
bench-first-sync: vm-prepare build
	$(GO) run ./e2e/bench/cmd/firstsync --kipvs $(BIN)/kipvs --vm-cache $(VMCACHE) --n $(FIRSTSYNC_N) --e $(FIRSTSYNC_E) \
		--out $(CACHE)/bench/firstsync $(FIRSTSYNC_ARGS)

# The Helm chart and the alerting rules, on the host in seconds: helm lint, helm template of
# both modes with a values file setting every value (charts/kipvs/ci/), the chart's
# DaemonSet against the kustomize render's (deploy/chart_test.go), and promtool's unit
# tests of deploy/monitoring's rules.
test-chart: $(HELM) $(PROMTOOL) $(BIN)/kustomize
	$(HELM) lint --strict charts/kipvs
	@set -e; for f in charts/kipvs/ci/*-values.yaml; do \
		echo "$(HELM) lint --strict charts/kipvs --values $$f && $(HELM) template kipvs charts/kipvs --namespace kube-system --values $$f"; \
		$(HELM) lint --strict charts/kipvs --values $$f >/dev/null; \
		$(HELM) template kipvs charts/kipvs --namespace kube-system --values $$f >/dev/null; \
	done
	$(PROMTOOL) check rules deploy/monitoring/kipvs.rules.yaml
	$(PROMTOOL) test rules deploy/monitoring/kipvs.rules.test.yaml
	KIPVS_HELM=$(HELM) KIPVS_KUSTOMIZE=$(BIN)/kustomize $(GO) test -count=1 -run 'Chart|Monitoring' ./deploy

# helm from its Go module (cold: about 2 minutes on 2 cores).
helm: $(HELM)
$(HELM):
	GOBIN=$(dir $@) CGO_ENABLED=0 $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# promtool from the nested module hack/promtool (Prometheus's go.mod has a replace directive,
# so go install ...@version refuses it).
promtool: $(PROMTOOL)
$(PROMTOOL): hack/promtool/go.mod
	cd hack/promtool && CGO_ENABLED=0 $(GO) build -o $@ github.com/prometheus/prometheus/cmd/promtool

# kustomize renders deploy/ for the e2e tests (installed from the Go module proxy).
$(BIN)/kustomize:
	GOBIN=$(BIN) CGO_ENABLED=0 $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

# bin/kipvs, the systemd unit and its environment file (an existing one is kept).
install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/default
	install -m 0755 $(BIN)/kipvs $(DESTDIR)$(BINDIR)/kipvs
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' deploy/systemd/kipvs.service \
		> $(DESTDIR)$(UNITDIR)/kipvs.service && chmod 0644 $(DESTDIR)$(UNITDIR)/kipvs.service
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/default/kipvs ]; then \
		echo "keeping the existing $(DESTDIR)$(SYSCONFDIR)/default/kipvs"; \
	else \
		echo "install -m 0644 deploy/systemd/kipvs.env $(DESTDIR)$(SYSCONFDIR)/default/kipvs"; \
		install -m 0644 deploy/systemd/kipvs.env $(DESTDIR)$(SYSCONFDIR)/default/kipvs; \
	fi

# hack/ociimage, the image builder (no container engine).
ociimage:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ociimage ./hack/ociimage

# The kipvs image as an OCI archive (IMAGE_ARCHIVE, its digest in IMAGE_ARCHIVE.digest), built
# without a container engine; push it with `crane push`/`skopeo copy oci-archive:`, import it
# with `ctr -n k8s.io images import`. It is then loaded into CONTAINER_TOOL when one is found
# and reaches an engine (one given explicitly must).
image: image-archive
	@tool='$(CONTAINER_TOOL)'; explicit='$(filter command line environment,$(origin CONTAINER_TOOL))'; \
	case "$$tool" in ""|none) echo "make image: $(IMAGE_ARCHIVE) written (no container engine to load it into)"; exit 0;; esac; \
	case "$$(basename "$$tool")" in docker|podman) \
		if ! timeout 20 "$$tool" info >/dev/null 2>&1; then \
			if [ -n "$$explicit" ]; then echo "make image: $$tool reaches no container engine ('$$tool info' failed): $(IMAGE_ARCHIVE) is written but not loaded" >&2; exit 1; fi; \
			echo "make image: $(IMAGE_ARCHIVE) written; $$tool reaches no container engine, so it is not loaded"; exit 0; \
		fi;; \
	esac; \
	case "$$(basename "$$tool")" in \
		buildah) set -x; "$$tool" pull oci-archive:$(IMAGE_ARCHIVE);; \
		*) set -x; "$$tool" load -i $(IMAGE_ARCHIVE);; \
	esac

# The archive alone (what test-e2e's TestImageRootfs runs kipvs from).
image-archive: build ociimage
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build kipvs --input kipvs=$(BIN)/kipvs --tag $(IMAGE) \
		--debs $(DEBCACHE) --out $(IMAGE_ARCHIVE) --digest-file $(IMAGE_ARCHIVE).digest

# A release into RELEASE_DIR (docs/release.md): static kipvs binaries for linux/amd64 and
# linux/arm64, the image index of both (RELEASE_IMAGE, as IMAGE but for both architectures),
# each architecture's SPDX SBOM, install.yaml (deploy/ rendered, the VERSION tag) and SHA256SUMS.
# The index is built a second time in a temporary directory and the two digests must agree;
# then release-qemu runs the arm64 image's kipvs and iptables under qemu-user.
RELEASE_DIR  ?= $(BIN)/release
RELEASE_ARCHES := amd64 arm64
release: ociimage $(BIN)/kustomize
	@set -e; rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR); \
	for a in $(RELEASE_ARCHES); do \
		echo "build kipvs-linux-$$a"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(RELEASE_DIR)/kipvs-linux-$$a ./cmd/kipvs; \
	done; \
	build() { SOURCE_DATE_EPOCH=$(BUILD_EPOCH) $(BIN)/ociimage build kipvs --arch amd64,arm64 \
		--input kipvs=$(RELEASE_DIR)/kipvs-linux-{arch} --tag $(IMAGE) --debs $(DEBCACHE) --out $$1/kipvs-image.oci.tar \
		--digest-file $$1/kipvs-image.oci.tar.digest --packages-out $$1/packages.json; }; \
	build $(RELEASE_DIR); \
	tmp=$$(mktemp -d); trap 'rm -rf '$$tmp EXIT; build $$tmp; \
	if ! cmp -s $(RELEASE_DIR)/kipvs-image.oci.tar $$tmp/kipvs-image.oci.tar; then \
		echo "make release: the image index is not reproducible: $$(cat $(RELEASE_DIR)/kipvs-image.oci.tar.digest) then $$(cat $$tmp/kipvs-image.oci.tar.digest)" >&2; exit 1; \
	fi; \
	echo "make release: the image index built twice: $$(cat $$tmp/kipvs-image.oci.tar.digest) both times"; \
	CGO_ENABLED=0 $(GO) build -o $(BIN)/sbom ./hack/sbom; \
	for a in $(RELEASE_ARCHES); do \
		SOURCE_DATE_EPOCH=$(BUILD_EPOCH) $(BIN)/sbom --binary $(RELEASE_DIR)/kipvs-linux-$$a --packages $(RELEASE_DIR)/packages.json \
			--arch $$a --name kipvs-$(VERSION)-linux-$$a --out $(RELEASE_DIR)/kipvs-linux-$$a.spdx.json; \
	done; \
	rm $(RELEASE_DIR)/packages.json; \
	$(BIN)/kustomize build deploy > $(RELEASE_DIR)/install.yaml; \
	grep -q 'image: ghcr.io/kipvs/kipvs:$(VERSION)$$' $(RELEASE_DIR)/install.yaml || { echo "make release: install.yaml does not install ghcr.io/kipvs/kipvs:$(VERSION)" >&2; exit 1; }; \
	v=$$($(RELEASE_DIR)/kipvs-linux-amd64 --version); [ "$$v" = "kipvs $(VERSION) (kube-proxy v1.34 compatible)" ] || { echo "make release: kipvs-linux-amd64 says $$v" >&2; exit 1; }; \
	cd $(RELEASE_DIR) && sha256sum $$(ls | grep -v '^SHA256SUMS$$') > SHA256SUMS && cat SHA256SUMS
	$(MAKE) release-qemu

# The arm64 image's kipvs (version) and iptables (--version, with the image's own arm64
# libraries and loader) under qemu-user emulation, from the image index's arm64 rootfs.
release-qemu: ociimage
	@set -e; command -v qemu-aarch64-static >/dev/null || { echo "make release-qemu: qemu-aarch64-static missing (apt-get install qemu-user-static)" >&2; exit 1; }; \
	root=$$(mktemp -d); trap 'rm -rf '$$root EXIT; \
	$(BIN)/ociimage unpack $(RELEASE_DIR)/kipvs-image.oci.tar --arch arm64 --out $$root; \
	file -b $$root/usr/local/bin/kipvs; \
	set -x; qemu-aarch64-static $$root/usr/local/bin/kipvs version; \
	qemu-aarch64-static -L $$root $$root/usr/sbin/iptables-legacy --version; \
	qemu-aarch64-static -L $$root $$root/usr/sbin/iptables-legacy-save --version

# The pause image kubelet's pods need (registry.k8s.io/pause:3.10.1), from hack/pause.
image-pause: ociimage
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/pause ./hack/pause
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build pause --input pause=$(BIN)/pause \
		--out $(PAUSE_ARCHIVE) --digest-file $(PAUSE_ARCHIVE).digest

# agnhost, the e2e suite's test image (registry.k8s.io/e2e-test-images/agnhost:2.56) on Debian 12,
# its binary built from k8s.io/kubernetes v1.34.10 in the nested module e2e/k8s.
image-agnhost: ociimage image-coredns
	cd e2e/k8s && CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/agnhost k8s.io/kubernetes/test/images/agnhost
	porter=$$(cd e2e/k8s && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter; \
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build agnhost --input agnhost=$(BIN)/agnhost --input coredns=$(BIN)/coredns \
		--input porter-crt=$$porter/localhost.crt --input porter-key=$$porter/localhost.key \
		--debs $(DEBCACHE) --out $(AGNHOST_ARCHIVE) --digest-file $(AGNHOST_ARCHIVE).digest

# The other images the suite's default selection runs (hack/ociimage/recipes.go, docs/conformance-testbed.md):
# the DNS tests' jessie prober, and busybox, the conntrack regression server and distroless-iptables,
# which only the tests that need two nodes run. Each under its upstream name, into bin/NAME-image.oci.tar.
SUITE_IMAGES := jessie-dnsutils busybox regression-issue-74839 distroless-iptables
image-jessie-dnsutils image-busybox image-distroless-iptables: image-%: ociimage
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build $* --debs $(DEBCACHE) \
		--out $(BIN)/$*-image.oci.tar --digest-file $(BIN)/$*-image.oci.tar.digest
image-regression-issue-74839: ociimage
	cd e2e/k8s && CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/regression-issue-74839 k8s.io/kubernetes/test/images/regression-issue-74839
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build regression-issue-74839 --input regression-issue-74839=$(BIN)/regression-issue-74839 \
		--out $(BIN)/regression-issue-74839-image.oci.tar --digest-file $(BIN)/regression-issue-74839-image.oci.tar.digest

# kube-proxy v1.34.10 as registry.k8s.io/kube-proxy:v1.34.10 (hack/ociimage's kube-proxy recipe):
# the binary of make e2e-bins with iptables (a wrapper picks nft or legacy), ipset, modprobe and
# nft from Debian 12; the node runs' reference proxy (NODE_PROXY=kube-proxy, docs/conformance-testbed.md).
KUBE_PROXY_ARCHIVE ?= $(BIN)/kube-proxy-image.oci.tar
KUBE_PROXY_IMAGE   := registry.k8s.io/kube-proxy:v1.34.10
image-kube-proxy: ociimage e2e-bins
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build kube-proxy --input kube-proxy=$(K8SBIN)/kube-proxy \
		--tag $(KUBE_PROXY_IMAGE) --debs $(DEBCACHE) --out $(KUBE_PROXY_ARCHIVE) --digest-file $(KUBE_PROXY_ARCHIVE).digest

# CoreDNS v1.12.1, kubeadm v1.34's cluster DNS, built from its Go module in the nested module
# e2e/coredns (its dependencies stay out of the main module and away from e2e/k8s) as upstream
# builds it (-s -w, GitCommit of the v1.12.1 tag), as the image COREDNS_IMAGE (hack/ociimage's
# coredns recipe). Cold: about 10 minutes on 2 cores; then seconds.
COREDNS_ARCHIVE ?= $(BIN)/coredns-image.oci.tar
COREDNS_IMAGE   := registry.k8s.io/coredns/coredns:v1.12.1
image-coredns: ociimage
	cd e2e/coredns && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X github.com/coredns/coredns/coremain.GitCommit=707c7c1' \
		-o $(BIN)/coredns github.com/coredns/coredns
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/ociimage build coredns --input coredns=$(BIN)/coredns \
		--out $(COREDNS_ARCHIVE) --digest-file $(COREDNS_ARCHIVE).digest

# Every image a node of the conformance run imports, as OCI archives in bin/.
e2e-images: image-archive image-pause image-agnhost image-coredns $(addprefix image-,$(SUITE_IMAGES))

# The same image built by a container engine from deploy/Containerfile (its build stage runs
# hack/ociimage's kipvs recipe on an installed Debian 12, so the file system is the same); for
# machines without Debian's apt. Needs podman, docker with a reachable engine, or buildah.
image-containerfile:
	@tool='$(CONTAINER_TOOL)'; \
	if [ -z "$$tool" ] || [ "$$tool" = none ]; then \
		echo "make image-containerfile: no container tool (podman, docker or buildah) on this machine: use make image" >&2; exit 1; \
	fi; \
	case "$$(basename "$$tool")" in docker|podman) \
		if ! timeout 20 "$$tool" info >/dev/null 2>&1; then \
			echo "make image-containerfile: $$tool is installed but reaches no container engine ('$$tool info' failed); start the engine, or use make image" >&2; exit 1; \
		fi;; \
	esac
	$(MAKE) build
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image && cp $(BIN)/kipvs $(BIN)/image/
	CGO_ENABLED=0 $(GO) build -o $(BIN)/image/ociimage ./hack/ociimage
	$(CONTAINER_TOOL) build -f deploy/Containerfile -t $(IMAGE) $(BIN)/image

# The Debian packages the VM tests and the demo need (e2e/vm/deps.sh names them): installed
# when run as root, otherwise one line says which are missing and how to install them.
deps:
	@e2e/vm/deps.sh

vm-prepare: deps
	@e2e/vm/prepare.sh $(VMCACHE)

lint-quick:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags kernel ./...
	$(GO) vet -tags e2e ./...
	$(GO) vet -tags oracle ./...

lint: lint-quick
	@command -v golangci-lint >/dev/null || GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.6.2
	PATH=$(BIN):$$PATH golangci-lint run ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Fuzzes the whole sync (internal/daemon FuzzSync) for FUZZTIME, then the configuration file
# reader (internal/config FuzzParse) and the source file decoder (internal/watch/filesource FuzzDecode)
# for FUZZTIME_SMALL each. A failure is saved under the package's testdata/fuzz/<Target>/ and
# replayed by every `go test` (docs/development.md). FUZZMINIMIZE bounds the minimization of
# each new input, which by default (60 s) can take most of a short run.
FUZZTIME ?= 10m
FUZZTIME_SMALL ?= 2m
FUZZMINIMIZE ?= 5s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzSync$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) ./internal/daemon
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME_SMALL) -fuzzminimizetime $(FUZZMINIMIZE) ./internal/config
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME_SMALL) -fuzzminimizetime $(FUZZMINIMIZE) ./internal/watch/filesource

clean:
	rm -rf $(BIN) $(VMCACHE)/bin.* $(E2EBIN)
