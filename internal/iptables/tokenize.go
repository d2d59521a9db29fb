package iptables

import (
	"fmt"
	"strings"
)

// Tokenize splits an iptables-restore or iptables-save line into words,
// honouring double quotes (and \" inside them) as iptables-restore does.
func Tokenize(l string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c == '"':
			quoted, inWord = !quoted, true
		case c == '\\' && quoted && i+1 < len(l) && l[i+1] == '"':
			cur.WriteByte('"')
			i++
		case (c == ' ' || c == '\t') && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", l)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Join is the inverse of Tokenize.
func Join(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\"") {
			w = `"` + strings.ReplaceAll(w, `"`, `\"`) + `"`
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}
