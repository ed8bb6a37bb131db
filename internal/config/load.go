package config

import (
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"
)

// Load returns the effective configuration once the flag set given to AddFlags has been
// parsed, as kube-proxy v1.34 builds it: without --config, Defaults() and every flag set
// explicitly on the command line; with --config, the file (whose unset fields get
// kube-proxy's file defaults) and only the flags kube-proxy still applies over a file
// (see AppliesWithConfig), each other flag given being logged at Warn level as ignored.
// The result is validated. All problems are returned together (errors.Join of *FieldError,
// wrapped with the file name for problems in the file); the file's unknown and duplicate
// fields and the ignored flags are logged at Warn level (even when Load fails), and
// kube-proxy settings kipvs accepts but ignores at Info level, on log (nil: not logged).
func Load(f *Flags, log *zap.Logger) (Config, error) {
	c := Defaults()
	var errs []error
	var file parsedFile
	configFile := f.configFile()
	if configFile != "" {
		data, err := os.ReadFile(configFile)
		if err != nil {
			return Config{}, fmt.Errorf("read the --config file: %w", err)
		}
		file, err = parseFile(data)
		if err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", configFile, err)
		}
		if len(file.errs) > 0 {
			errs = append(errs, fmt.Errorf("config file %s: %w", configFile, errors.Join(file.errs...)))
		}
		c = file.config
	}
	ferrs, flagNotices, ignored := f.apply(&c)
	errs = append(errs, ferrs...)
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	// The warnings may explain an error (a value set by an ignored flag), so come first.
	logWarnings(log, configFile, file.warnings)
	logIgnoredFlags(log, configFile, ignored)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	logNotices(log, configFile, file.notices)
	logNotices(log, "", flagNotices)
	return c, nil
}
