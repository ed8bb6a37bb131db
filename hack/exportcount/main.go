package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	methods := flag.Bool("methods", false, "count exported methods too")
	verbose := flag.Bool("v", false, "list the names nothing outside uses")
	flag.Parse()
	root := flag.Arg(0)
	if root == "" {
		root = "."
	}
	modBytes, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	module := strings.Fields(strings.SplitN(string(modBytes), "\n", 2)[0])[1]
	fset := token.NewFileSet()
	type file struct {
		dir, pkg string
		test     bool
		f        *ast.File
	}
	var files []file
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		files = append(files, file{dir: rel, pkg: f.Name.Name, test: strings.HasSuffix(p, "_test.go"), f: f})
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// exported names per package directory (non-test files of the package proper)
	exported := map[string]map[string]bool{}
	for _, fl := range files {
		if fl.test || !strings.HasPrefix(fl.dir, "internal/") {
			continue
		}
		m := exported[fl.dir]
		if m == nil {
			m = map[string]bool{}
			exported[fl.dir] = m
		}
		for _, d := range fl.f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					m[d.Name.Name] = true
				} else if *methods {
					t := d.Recv.List[0].Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					if ix, ok := t.(*ast.IndexExpr); ok {
						t = ix.X
					}
					if id, ok := t.(*ast.Ident); ok && id.IsExported() {
						m[id.Name+"."+d.Name.Name] = true
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							m[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								m[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	// references from outside: pkg.Name selectors in files of other directories or of the
	// external _test package; methods by selector name anywhere outside (approximate).
	used := map[string]map[string]bool{}
	selNames := map[string]map[string]bool{} // dir -> selector names seen outside dir
	for _, fl := range files {
		imports := map[string]string{}
		for _, im := range fl.f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(path, module+"/") {
				continue
			}
			dir := strings.TrimPrefix(path, module+"/")
			name := filepath.Base(dir)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = dir
		}
		ast.Inspect(fl.f, func(n ast.Node) bool {
			se, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := se.X.(*ast.Ident); ok {
				if dir, ok := imports[id.Name]; ok {
					if used[dir] == nil {
						used[dir] = map[string]bool{}
					}
					used[dir][se.Sel.Name] = true
				}
			}
			for dir := range exported {
				if dir != fl.dir || strings.HasSuffix(fl.pkg, "_test") {
					if selNames[dir] == nil {
						selNames[dir] = map[string]bool{}
					}
					selNames[dir][se.Sel.Name] = true
				}
			}
			return true
		})
	}
	var dirs []string
	for d := range exported {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	total, totalUnused := 0, 0
	for _, d := range dirs {
		var unused []string
		for n := range exported[d] {
			if _, m, ok := strings.Cut(n, "."); ok {
				if !selNames[d][m] {
					unused = append(unused, n)
				}
				continue
			}
			if !used[d][n] {
				unused = append(unused, n)
			}
		}
		sort.Strings(unused)
		total += len(exported[d])
		totalUnused += len(unused)
		fmt.Printf("%-32s %4d exported %4d unused outside\n", d, len(exported[d]), len(unused))
		if *verbose && len(unused) > 0 {
			fmt.Printf("    %s\n", strings.Join(unused, " "))
		}
	}
	fmt.Printf("%-32s %4d exported %4d unused outside\n", "TOTAL", total, totalUnused)
}
