package blobsync

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Match reports whether name matches the shell pattern as Python's
// fnmatch.fnmatchcase does: "*" matches any run of characters including
// "/", "?" any one character, "[seq]" one character in seq and "[!seq]"
// one character not in seq; a "[" without a closing "]" is literal.
func Match(pattern, name string) bool {
	return compilePattern(pattern).MatchString(name)
}

// excluder holds compiled exclude patterns.
type excluder []*regexp.Regexp

func newExcluder(patterns []string) excluder {
	ex := make(excluder, len(patterns))
	for i, p := range patterns {
		ex[i] = compilePattern(p)
	}
	return ex
}

// excluded reports whether the slash-separated relative path rel is
// excluded; a directory is also tried with a trailing "/" (Ray's
// _ExcludingLocalFilesystem).
func (ex excluder) excluded(rel string, isDir bool) bool {
	for _, re := range ex {
		if re.MatchString(rel) || isDir && re.MatchString(rel+"/") {
			return true
		}
	}
	return false
}

// compilePattern translates an fnmatch pattern to an anchored regexp,
// following Python's fnmatch.translate.
func compilePattern(pat string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	r := []rune(pat)
	for i := 0; i < len(r); {
		c := r[i]
		i++
		switch c {
		case '*':
			for i < len(r) && r[i] == '*' {
				i++
			}
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			class, next, ok := translateSet(r, i)
			if !ok {
				b.WriteString(`\[`)
				continue
			}
			b.WriteString(class)
			i = next
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

// translateSet translates the set starting after the "[" at r[i-1]. It
// returns the regexp, the index after the closing "]", and false when the
// set is not closed (the "[" is then literal).
func translateSet(r []rune, i int) (string, int, bool) {
	j := i
	if j < len(r) && r[j] == '!' {
		j++
	}
	if j < len(r) && r[j] == ']' {
		j++
	}
	for j < len(r) && r[j] != ']' {
		j++
	}
	if j >= len(r) {
		return "", i, false
	}
	body := r[i:j]
	negate := len(body) > 0 && body[0] == '!'
	if negate {
		body = body[1:]
	}
	var items strings.Builder
	for k := 0; k < len(body); {
		if k+2 < len(body) && body[k+1] == '-' {
			if body[k] <= body[k+2] { // Python drops reversed ranges
				fmt.Fprintf(&items, "%s-%s", classChar(body[k]), classChar(body[k+2]))
			}
			k += 3
			continue
		}
		items.WriteString(classChar(body[k]))
		k++
	}
	switch {
	case items.Len() == 0 && negate:
		return ".", j + 1, true // "[!]" after a "]": any character
	case items.Len() == 0:
		return "[^\\x00-\\x{10FFFF}]", j + 1, true // matches nothing
	case negate:
		return "[^" + items.String() + "]", j + 1, true
	default:
		return "[" + items.String() + "]", j + 1, true
	}
}

// classChar escapes one character for use inside a regexp class.
func classChar(c rune) string {
	if c < utf8.RuneSelf && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
		return `\` + string(c)
	}
	return string(c)
}
