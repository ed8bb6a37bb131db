package main

import (
	"go.uber.org/zap"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/logging"
)

// boot reads the configuration of run and cleanup from their flags and makes the logger it
// asks for; what was logged while reading it is written through that logger (or, when the
// configuration or the logger fails, as console lines before the error).
func boot(flags *config.Flags) (config.Config, *zap.Logger, error) {
	bootLog, rec := logging.NewBoot()
	cfg, err := config.Load(flags, bootLog)
	if err != nil {
		rec.ReplayConsole()
		return cfg, nil, err
	}
	log, err := logging.New(string(cfg.LogFormat), cfg.Verbosity, cfg.VModule)
	if err != nil {
		rec.ReplayConsole()
		return cfg, nil, err
	}
	rec.Replay(log)
	return cfg, log, nil
}
