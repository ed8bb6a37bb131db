package ipvs

import "syscall"

// WithMaxBatch caps the ops per sendmsg in Apply (default: as many as the socket buffers
// allow, at most 1024). 1 makes Apply send one message per op.
func WithMaxBatch(n int) Option { return func(o *options) { o.maxBatch = n } }

// Sends returns how many sendmsg calls c's socket has made.
func Sends(c *Client) int { return c.conn.sends }

// MaxOps returns how many ops c's Apply sends per sendmsg.
func MaxOps(c *Client) int { return c.conn.maxOps }

// SetMaxOps sets how many ops c's Apply sends per sendmsg.
func SetMaxOps(c *Client, n int) { c.conn.maxOps = n }

// RawConn returns c's netlink socket.
func RawConn(c *Client) syscall.RawConn { return c.conn.rc }
