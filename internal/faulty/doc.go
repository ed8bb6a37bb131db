// Package faulty makes the kernel adapters' fakes fail at random, reproducibly, the way a
// busy kernel does: an Injector, given to a fake with its SetFaulty method, is asked before
// every kernel request the fake models (each mutation, and each read when read faults are on)
// whether that request fails, and with which error. A request that fails changes nothing;
// what a failure in the middle of a multi-request call leaves behind is the fake's business
// and follows the kernel (see each fake's SetFaulty).
//
// Decisions are a pure function of the seed, the request's description and how many times
// that description was asked about before, not of the order in which different requests
// come: the same seed fails the same requests even when the caller visits a map in a
// different order. One Injector may serve every fake of a test node; it is safe for
// concurrent use, and a nil *Injector never fails anything.
package faulty
