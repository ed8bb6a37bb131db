package fieldguard

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// checkName is how a hand-written comparison or emptiness check is named: a function or
// method returning bool whose name says it compares (Equal, same..., ...Changed,
// ...Change) or tests for nothing (Empty, ...Nothing).
var checkName = regexp.MustCompile(`^(Empty|IsEmpty|Equal|Same|same|equal|empty|changed)|(Equal|Empty|Changed|Change|Same|Nothing)$`)

// guarded maps every such check in internal/ and cmd/ ("dir Recv.Name") to the test in its
// package that runs it under the field guard (Check, CheckPresence or Mutations), or to
// why it needs none ("exempt: ...").
var guarded = map[string]string{
	"internal/proxy VirtualServer.Equal":             "TestVirtualServerEqualChecksEveryField",
	"internal/proxy Options.Equal":                   "TestOptionsEqualChecksEveryField",
	"internal/proxy ServiceState.contributesNothing": "TestContributesNothingChecksEveryField",
	"internal/proxy Touched.Empty":                   "TestTouchedEmptyGuard",
	"internal/reconcile serviceSettingsEqual":        "TestServiceSettingsEqualChecksEveryField",
	"internal/reconcile Plan.Empty":                  "TestPlanEmptyGuard",
	"internal/reconcile CleanupPlan.Empty":           "TestCleanupPlanEmptyGuard",
	"internal/reconcile journal.empty":               "TestJournalEmptyGuard",
	"internal/ipset sameMembers":                     "TestSameMembersGuard",
	"internal/svcstats samePlanInput":                "TestSamePlanInputGuard",
	"internal/netfilter Result.Changed":              "TestResultChangedGuard",
	"internal/daemon healthChecksChanged":            "TestHealthChecksChangedGuard",
	"internal/watch NodeRelevantChange":              "TestNodeRelevantChangeGuard@internal/daemon",
	"internal/watch sameObject":                      "exempt: compares whole objects (pointer, resourceVersion, or semantic DeepEqual of everything)",
	"internal/config configChanged":                  "exempt: an fsnotify event predicate, not a comparison of fields",
}

// Every hand-written change or emptiness check is guarded: one added without a guard
// (or an exemption saying why) fails here, and each listed guard test exists and uses
// the field guard on the check it names.
func TestEveryChangeCheckIsGuarded(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	found := map[string]bool{}
	tests := map[string]string{} // "dir TestName" -> its source
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			rel = filepath.ToSlash(rel)
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, src, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok {
					continue
				}
				if strings.HasSuffix(p, "_test.go") {
					if strings.HasPrefix(fd.Name.Name, "Test") {
						tests[rel+" "+fd.Name.Name] = string(src[fd.Pos()-1 : fd.End()-1])
					}
					continue
				}
				if checkName.MatchString(fd.Name.Name) && returnsBool(fd) {
					found[rel+" "+recvName(fd)+fd.Name.Name] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(found)) {
		if _, ok := guarded[k]; !ok {
			t.Errorf("%s is a hand-written change or emptiness check with no field guard: add a test that runs it under fieldguard.Check or CheckPresence and list it in guarded, or list why it needs none", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(guarded)) {
		test := guarded[k]
		if !found[k] {
			t.Errorf("guarded lists %s, which no longer exists (or is no longer named as a check)", k)
			continue
		}
		if strings.HasPrefix(test, "exempt: ") {
			continue
		}
		dir, name := strings.Fields(k)[0], k[strings.LastIndexByte(k, ' ')+1:]
		name = name[strings.LastIndexByte(name, '.')+1:]
		if i := strings.IndexByte(test, '@'); i >= 0 {
			test, dir = test[:i], test[i+1:]
		}
		body, ok := tests[dir+" "+test]
		switch {
		case !ok:
			t.Errorf("%s: its guard %s is not a test in %s", k, test, dir)
		case !strings.Contains(body, "fieldguard.") || !strings.Contains(body, name):
			t.Errorf("%s: its guard %s does not run %s under the field guard", k, test, name)
		}
	}
}

func returnsBool(fd *ast.FuncDecl) bool {
	r := fd.Type.Results
	if r == nil || len(r.List) != 1 || len(r.List[0].Names) > 1 {
		return false
	}
	id, ok := r.List[0].Type.(*ast.Ident)
	return ok && id.Name == "bool"
}

// recvName is "Type." for a method ("" for a function).
func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return ""
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.Ident:
		return x.Name + "."
	case *ast.IndexExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "."
		}
	}
	return "?."
}
