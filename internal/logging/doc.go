// Package logging builds kipvs's one zap logger and routes client-go's klog output into it.
package logging
