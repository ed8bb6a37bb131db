package main

import (
	"os"
	"strconv"

	"go.uber.org/zap"
)

// oomScoreAdjPath is where a process sets its own OOM score adjustment.
const oomScoreAdjPath = "/proc/self/oom_score_adj"

// applyOOMScoreAdj writes the OOM score adjustment v to path, as kube-proxy does when it
// starts running (not for --cleanup or --init-only). Lowering it needs CAP_SYS_RESOURCE; a
// failure is logged and kipvs runs on, as kube-proxy does.
func applyOOMScoreAdj(path string, v int32, log *zap.Logger) {
	if err := os.WriteFile(path, []byte(strconv.Itoa(int(v))), 0o644); err != nil {
		log.Warn("could not set the OOM score adjustment (oomScoreAdj, --oom-score-adj); running with the inherited one",
			zap.Int32("oomScoreAdj", v), zap.Error(err))
		return
	}
	log.Debug("set the OOM score adjustment", zap.Int32("oomScoreAdj", v), zap.String("path", path))
}
