// Package debian fetches Debian packages with apt-get download into a cache directory, follows
// their Depends and Pre-Depends, and unpacks their data into an in-memory file system
// (dpkg-deb --fsys-tarfile; no maintainer script runs, nothing is installed).
package debian
