package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/kipvs/kipvs/internal/config"
	"github.com/kipvs/kipvs/internal/daemon"
	"github.com/kipvs/kipvs/internal/logging"
	"github.com/kipvs/kipvs/internal/metrics"
	"github.com/kipvs/kipvs/internal/server"
	"github.com/kipvs/kipvs/internal/version"
)

func newRunCommand() *cobra.Command {
	var flags *config.Flags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the proxy: program Services into IPVS on this node (kube-proxy's flags and config file)",
		Long: `run watches Services and EndpointSlices (from the API, or from --kipvs-source-file) and keeps
IPVS, the KUBE-* ipsets, the kube-ipvs0 VIPs and kipvs's iptables chains in step with them.
It accepts kube-proxy's flags and KubeProxyConfiguration file (mode: ipvs). As in kube-proxy,
with --config most other flags are ignored (each with a warning), and kipvs exits when the
file changes, to be restarted with it. Kernel state is left in place on exit, so a restart or
a switch back to kube-proxy keeps every live connection.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := boot(flags)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			if err := logging.BridgeKlog(log, cfg.Verbosity, cfg.VModule); err != nil {
				return err
			}
			opts := runOptions{oomScoreAdjPath: oomScoreAdjPath}
			if cfg.ConfigFile != "" && cfg.WriteConfigTo == "" && !cfg.Cleanup && !cfg.InitOnly {
				// Watched from now on, so that a change while kipvs starts is not missed.
				w, err := config.WatchFile(cfg.ConfigFile)
				if err != nil {
					return err
				}
				defer w.Close()
				opts.configWatch = w.Wait
			}
			return runDaemon(cmd.Context(), cfg, log, opts)
		},
	}
	flags = config.AddFlags(cmd.Flags())
	return cmd
}

// runOptions are what runDaemon gets besides the configuration.
type runOptions struct {
	// oomScoreAdjPath is where the OOM score adjustment is written (oomScoreAdjPath).
	oomScoreAdjPath string
	// configWatch, when set, waits for the --config file to change (config.FileWatch.Wait).
	configWatch func(context.Context) error
}

func runDaemon(parent context.Context, cfg config.Config, log *zap.Logger, opts runOptions) error {
	if cfg.WriteConfigTo != "" {
		if err := cfg.WriteConfigFile(cfg.WriteConfigTo); err != nil {
			return err
		}
		log.Info("wrote the effective configuration", zap.String("path", cfg.WriteConfigTo))
		return nil
	}
	if cfg.Cleanup {
		// As kube-proxy --cleanup, which removes what every proxy mode left, its
		// nftables-mode table included.
		return runCleanup(parent, cfg, log, false, true)
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("starting kipvs", zap.String("version", version.Get().Version))

	nodeName, err := daemon.NodeName(&cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	// client-go's rest_client_* metrics, installed before the first API request. client-go
	// accepts one set of adapters per process: this is the only place that installs them.
	if err := metrics.NewRESTClient(reg).Install(); err != nil {
		log.Warn("client-go metrics unavailable", zap.Error(err))
	}
	deps, closeDeps, err := daemon.RealDeps(ctx, &cfg, nodeName, log)
	if err != nil {
		return err
	}
	defer closeDeps()
	deps.Registry = reg
	d, err := daemon.New(cfg, nodeName, log, deps)
	if err != nil {
		return err
	}
	if err := d.Prepare(ctx); err != nil {
		return err
	}
	if cfg.InitOnly {
		log.Info("--init-only: node prepared, exiting")
		return nil
	}
	applyOOMScoreAdj(opts.oomScoreAdjPath, cfg.OOMScoreAdj, log)

	var wg sync.WaitGroup
	configChanged := make(chan error, 1)
	if opts.configWatch != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := exitOnConfigChange(ctx, opts.configWatch, stop, log); err != nil {
				configChanged <- err
			}
		}()
	}
	serveHTTP(ctx, &wg, &cfg, d, stop, log)
	if err := deps.Source.Start(ctx); err != nil {
		stop()
		wg.Wait()
		return fmt.Errorf("start the Service source: %w", err)
	}
	err = d.Run(ctx)
	stop()
	wg.Wait()
	<-deps.Source.Done()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("kipvs stopped; kernel state left in place")
	select {
	case err := <-configChanged:
		return err // a non-zero exit, as kube-proxy's, for the restart to pick up the new file
	default:
		return nil
	}
}

// serveHTTP starts the health and metrics servers cfg asks for, each in a goroutine of wg
// that ends with ctx. As kube-proxy's, a failed listen (the old proxy still holds the port
// during a swap) is retried every 5 s, unless --bind-address-hard-fail is set: then it ends
// the run through stop.
func serveHTTP(ctx context.Context, wg *sync.WaitGroup, cfg *config.Config, d *daemon.Daemon, stop func(), log *zap.Logger) {
	// failedReason is kube-proxy's Node Event reason for a server that cannot start.
	serve := func(name, failedReason string, addr string, h http.Handler) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := server.Serve(ctx, name, addr, h, server.ServeOptions{
				HardFail: cfg.BindAddressHardFail,
				OnError: func(err error) {
					log.Error("server failed; retrying", zap.Error(err), zap.Duration("retryIn", server.RetryInterval))
				},
			})
			if err != nil {
				log.Error("server failed and --bind-address-hard-fail is set", zap.Error(err))
				d.StartEvent(v1.EventTypeWarning, failedReason, err.Error())
				stop()
			}
		}()
	}
	if a := cfg.HealthzBindAddress; a.IsValid() {
		serve("health", "FailedToStartProxierHealthcheck", a.String(), d.Health().Handler())
	}
	if a := cfg.MetricsBindAddress; a.IsValid() {
		serve("metrics", "FailedToStartMetricServer", a.String(), metricsHandler(cfg, d, d.Gatherer(), func(v string) (string, error) { return logging.SetVerbosity(log, v) }))
	}
}

// metricsHandler serves /metrics and /configz, the debug endpoints cfg enables and, with
// enableProfiling, /debug/pprof and /debug/flags/v (setV changes the log verbosity).
func metricsHandler(cfg *config.Config, d *daemon.Daemon, g prometheus.Gatherer, setV func(string) (string, error)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", server.MetricsHandler(g, func() any { return cfg.KubeProxyConfiguration() }))
	server.HandleDebug(mux, cfg.Kipvs.DebugEndpoints, d.VirtualServers, d.State)
	if cfg.EnableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		server.HandleFlagsV(mux, setV)
	}
	return mux
}

// exitOnConfigChange waits with wait until the --config file changes or the watch fails, then
// logs why and ends the run through stop, and returns the reason; it returns nil once ctx is
// done first. kube-proxy exits the same way (with an error) when its file changes.
func exitOnConfigChange(ctx context.Context, wait func(context.Context) error, stop func(), log *zap.Logger) error {
	err := wait(ctx)
	if err == nil {
		return nil
	}
	if fc := (*config.FileChangedError)(nil); errors.As(err, &fc) {
		log.Info("config file changed, exiting to be restarted with it",
			zap.String("path", fc.Path), zap.String("event", fc.Op), zap.String("name", fc.Name))
	} else {
		log.Error("watching the config file failed, exiting as kube-proxy does", zap.Error(err))
	}
	stop()
	return err
}
