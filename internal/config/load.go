package config

import (
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"
)

// Load returns the effective configuration once the flag set given to AddFlags has been
// parsed: Defaults(), then the --config file if one was given (whose unset fields get
// kube-proxy's file defaults), then every flag set explicitly on the command line. The
// result is validated. All problems are returned together (errors.Join of *FieldError,
// wrapped with the file name for problems in the file); kube-proxy settings kipvs accepts
// but ignores are logged at Info level on log (nil: not logged).
func Load(f *Flags, log *zap.Logger) (Config, error) {
	c := Defaults()
	var errs []error
	var fileNotices []notice
	if f.configFile != "" {
		data, err := os.ReadFile(f.configFile)
		if err != nil {
			return Config{}, fmt.Errorf("read the --config file: %w", err)
		}
		fc, notices, ferrs, err := parseFile(data)
		if err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", f.configFile, err)
		}
		if len(ferrs) > 0 {
			errs = append(errs, fmt.Errorf("config file %s: %w", f.configFile, errors.Join(ferrs...)))
		}
		c, fileNotices = fc, notices
	}
	ferrs, flagNotices := f.apply(&c)
	errs = append(errs, ferrs...)
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	logNotices(log, f.configFile, fileNotices)
	logNotices(log, "", flagNotices)
	return c, nil
}
