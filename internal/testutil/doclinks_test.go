package testutil_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	// mdLink is an inline Markdown link or image: [text](target) or [text](target "title").
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// htmlAnchor is an explicit anchor: <a id="name"> or <a name="name">.
	htmlAnchor = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	// slugDrop is what GitHub drops from a heading to make its anchor.
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors returns the anchors of a Markdown file as GitHub makes them: each heading,
// lower-cased, punctuation dropped, spaces as hyphens, repeats numbered -1, -2, ...; and the
// explicit <a id> anchors. Headings inside code blocks are not headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inCode = !inCode
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		h = strings.NewReplacer("`", "", "*", "").Replace(h)
		s := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// Every relative link in the repository's Markdown files resolves: the file or directory
// exists, and a #fragment names a heading or an explicit anchor of the Markdown file it points
// to. Links inside code blocks and to other sites are not checked.
func TestMarkdownLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".cache", "bin", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(p string) map[string]bool {
		if a, ok := anchorCache[p]; ok {
			return a
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		anchorCache[p] = anchors(string(b))
		return anchorCache[p]
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		inCode := false
		for i, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inCode = !inCode
				continue
			}
			if inCode {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %s: %s does not exist", rel, i+1, target, path)
						continue
					}
				}
				checked++
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if !anchorsOf(dest)[frag] {
					t.Errorf("%s:%d: link %s: no heading or anchor #%s in %s", rel, i+1, target, frag, filepath.Base(dest))
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the walk or the pattern is broken")
	}
}
