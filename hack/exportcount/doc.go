// Command exportcount counts, per package under internal/, the exported package-level names
// (consts, vars, types, funcs; with -methods also exported methods as Type.Method) and how
// many of them no file outside the package refers to (any .go file of the module, tests and
// every build tag included; a package's own _test package counts as outside). A method
// counts as used when any file outside its package selects a name like it (approximate).
//
//	go run ./hack/exportcount [-methods] [-v] [MODULE_ROOT]
package main
