package netfilter

// jumpTo is the jump upstream installs: `-m comment --comment "COMMENT" -j TARGET` in the
// built-in chain from.
func jumpTo(from, target, comment string) Jump {
	return Jump{Chain: from, Rule: "-m comment --comment " + Quote(comment) + " -j " + target}
}

// withOwned replaces defaultOwned as the set of chains the handle owns.
func withOwned(owned ownedChains) Option { return func(o *options) { o.owned = owned } }
