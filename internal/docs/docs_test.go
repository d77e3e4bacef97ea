package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the directory of the repository's root go.mod, found by
// walking up from this package (deploy/ has a go.mod of its own, so the
// first go.mod above internal/ is the root one).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", dir, err)
	}
	return dir
}

// checkedFiles are the Markdown files a user reads: README.md, docs/*.md,
// bench/README.md and every .md under deploy/.
func checkedFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "bench", "README.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// inlineLink matches [text](target) and ![alt](target); the target
	// ends at the first space (a title may follow) or ")".
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition: [label]: target
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	hasScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	notInSlug  = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	fenceStart = regexp.MustCompile("^\\s{0,3}(```+|~~~+)")
)

type link struct {
	line   int
	target string
}

// links returns the link targets of a Markdown file, outside fenced code
// blocks and code spans, where a path is an example rather than a link.
func links(t *testing.T, path string) []link {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []link
	fence := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fenceStart.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1][:3]
			case strings.HasPrefix(m[1], fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{n, m[1]})
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, link{n, m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// anchors returns the fragment ids GitHub gives a Markdown file's
// headings: lower case, punctuation dropped, spaces to hyphens, and a
// -1, -2 … suffix on repeats.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(string(data), "\n") {
		if m := fenceStart.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1][:3]
			case strings.HasPrefix(m[1], fence):
				fence = ""
			}
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fence != "" || m == nil {
			continue
		}
		id := strings.ToLower(notInSlug.ReplaceAllString(m[1], ""))
		id = strings.ReplaceAll(id, " ", "-")
		if k := seen[id]; k > 0 {
			ids[id+"-"+itoa(k)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestRelativeLinksResolveInsideRepository follows every relative link of
// the user-facing Markdown: it must name a file or directory inside the
// repository (a reader of a clone has nothing else), and a #fragment into
// a Markdown file must name one of its headings.
func TestRelativeLinksResolveInsideRepository(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	for _, file := range checkedFiles(t, root) {
		rel, _ := filepath.Rel(root, file)
		for _, l := range links(t, file) {
			if hasScheme.MatchString(l.target) {
				continue // http:, https:, mailto: — not a file of the repository
			}
			checked++
			target, frag, _ := strings.Cut(l.target, "#")
			dest := file
			if target != "" {
				if strings.HasPrefix(target, "/") {
					t.Errorf("%s:%d: link %q is absolute; use a path relative to the file", rel, l.line, l.target)
					continue
				}
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if r, err := filepath.Rel(root, dest); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
					t.Errorf("%s:%d: link %q points outside the repository", rel, l.line, l.target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: no such file in the repository", rel, l.line, l.target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchors(t, dest)[frag] {
				t.Errorf("%s:%d: link %q: no heading with id %q in %s", rel, l.line, l.target, frag, filepath.Base(dest))
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative links at all: the link parser is broken")
	}
}

// TestNoReferenceToContractOutsideRepository: the product contract the
// developers work from lives outside the repository, so a user who follows
// a pointer to it finds nothing. The docs/ pages are the reference.
func TestNoReferenceToContractOutsideRepository(t *testing.T) {
	root := repoRoot(t)
	banned := []string{"SPEC" + ".md", "shared" + "/"}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if name == ".git" || name == "bin" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".md", ".go", ".yaml", ".yml", ".json", ".sh", "":
		default:
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for i, line := range strings.Split(string(data), "\n") {
			for _, b := range banned {
				if strings.Contains(line, b) {
					t.Errorf("%s:%d: mentions %q: %s", rel, i+1, b, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
