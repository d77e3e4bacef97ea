package config

import (
	"bytes"
	"fmt"
)

// expandEnv replaces ${NAME} and ${NAME:-default} in the raw file, before
// YAML parsing, so a variable can stand anywhere a value can (inside a flow
// list too). ":-" replaces an unset or empty value, as in a shell. Unlike a
// shell, an unset ${NAME} without a default is an error that names NAME:
// read as empty, it would surface only as its effect ("upstream.url:
// required"), or not at all for a token; ${NAME:-} says unset means empty.
// $${ is a literal ${; a $ not followed by { is left alone. Malformed
// references are reported and copied through unchanged, so parsing still
// finds the file's other problems.
func expandEnv(data []byte, lookup func(string) (string, bool)) ([]byte, []*Error) {
	var out bytes.Buffer
	var errs []*Error
	line := 1
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			line++
		}
		if c != '$' || i+1 >= len(data) {
			out.WriteByte(c)
			continue
		}
		if data[i+1] == '$' && i+2 < len(data) && data[i+2] == '{' {
			out.WriteString("${")
			i += 2
			continue
		}
		if data[i+1] != '{' {
			out.WriteByte(c)
			continue
		}
		end := bytes.IndexAny(data[i+2:], "}\n")
		if end < 0 || data[i+2+end] != '}' {
			errs = append(errs, &Error{Line: line, Msg: "unterminated ${ (write $${ for a literal)"})
			out.WriteByte(c)
			continue
		}
		ref := string(data[i+2 : i+2+end])
		name, def, hasDef := cutDefault(ref)
		if !validEnvName(name) {
			errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf("invalid variable reference ${%s}", ref)})
			out.WriteByte(c)
			continue
		}
		v, ok := lookup(name)
		if hasDef && (!ok || v == "") {
			v = def
		}
		if !ok && !hasDef {
			errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf("environment variable %s is not set (write ${%s:-} to allow it unset)", name, name)})
		}
		out.WriteString(v)
		i += 2 + end
	}
	return out.Bytes(), errs
}

func cutDefault(ref string) (name, def string, ok bool) {
	for i := 0; i+1 < len(ref); i++ {
		if ref[i] == ':' && ref[i+1] == '-' {
			return ref[:i], ref[i+2:], true
		}
	}
	return ref, "", false
}

// validEnvName is the POSIX shell rule: a letter or underscore, then
// letters, digits and underscores.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
