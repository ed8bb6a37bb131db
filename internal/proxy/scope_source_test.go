//go:build !kernel

package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// These tests read the package's source files, which the kernel test binary, run inside
// the VM away from the source tree, does not have.

// Every reason this package gives a Problem has a scope (reasonScope): a new reason left
// out would be reported by every node, the Event flood the scope exists to prevent for
// Service-wide Problems. The reasons are read from the source: the literal reason of every
// b.problem call and Problem literal, and for a reason built as prefix+reason (refuseClaim)
// every combination of the literals assigned to the two names in that function.
func TestEveryReasonHasAScope(t *testing.T) {
	reasons := problemReasons(t)
	if len(reasons) < 30 {
		t.Fatalf("found only %d reasons in the source (%v): the scan is broken", len(reasons), reasons)
	}
	for _, r := range reasons {
		if _, known := reasonScope(r); !known {
			t.Errorf("reason %q has no scope in reasonScope (scope.go): decide whether it depends on the node", r)
		}
	}
}

// problemReasons scans the package's non-test files for the reasons of its Problems.
func problemReasons(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	consts := map[string]string{}
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								consts[n.Name] = s
							}
						}
					}
				}
			}
		}
	}
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	value := func(e ast.Expr) (string, bool) {
		if s, ok := stringLit(e); ok {
			return s, true
		}
		if id, ok := e.(*ast.Ident); ok {
			s, ok := consts[id.Name]
			return s, ok
		}
		return "", false
	}
	for _, f := range parsed {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "problem" { // the helper passes its argument on
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				var reason ast.Expr
				switch n := n.(type) {
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "problem" && len(n.Args) == 3 {
						reason = n.Args[1]
					}
				case *ast.CompositeLit:
					if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Problem" {
						for _, el := range n.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Reason" {
								reason = kv.Value
							}
						}
					}
				}
				if reason == nil {
					return true
				}
				if s, ok := value(reason); ok {
					add(s)
					return true
				}
				bin, ok := reason.(*ast.BinaryExpr)
				if !ok || bin.Op != token.ADD {
					t.Errorf("%s: a reason that is neither a literal, a constant nor a sum of two names: the scan cannot check it", fset.Position(reason.Pos()))
					return true
				}
				for _, l := range assigned(fn.Body, bin.X) {
					for _, r := range assigned(fn.Body, bin.Y) {
						add(l + r)
					}
				}
				return true
			})
		}
	}
	slices.Sort(out)
	return out
}

// assigned returns the string literals assigned to the name e in body.
func assigned(body *ast.BlockStmt, e ast.Expr) []string {
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil
	}
	var out []string
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, l := range as.Lhs {
			if li, ok := l.(*ast.Ident); ok && li.Name == id.Name {
				if s, ok := stringLit(as.Rhs[i]); ok {
					out = append(out, s)
				}
			}
		}
		return true
	})
	return out
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
