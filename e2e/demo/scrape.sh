# make monitoring-scrape: runs inside the kernel-test VM. The demo (demo.sh: kipvs on the
# standalone source with three backends, requests through it), then kipvs's /metrics into
# the artifacts directory (deploy/monitoring/testdata/scrape.txt on the host).
set -eu
. "$(pwd)/e2e/demo/demo.sh"
mkdir -p /run/vm/artifacts
curl -sf -m 10 http://127.0.0.1:10249/metrics >/run/vm/artifacts/scrape.txt
printf '\n### saved /metrics: %s lines\n' "$(wc -l </run/vm/artifacts/scrape.txt)"
