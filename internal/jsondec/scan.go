package jsondec

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

// The scanner below walks JSON in place, for a caller that decodes a
// known shape by hand and skips the rest. It reads what encoding/json
// accepts, but more cheaply: strings are searched eight bytes at a time
// for the bytes that end a plain run (a quote, a backslash, a control
// character), where a decoder looks at every byte. Each function reports
// ok false on input it does not read, invalid or not; the caller then
// decodes the input the ordinary way, which decides (and errs where the
// input is invalid), so a false ok never changes a result.

// maxDepth bounds how deep Skip nests; deeper input is not read (the
// ordinary decoders take up to 10,000 levels).
const maxDepth = 512

// Space is the index of the first byte at or after i that is no JSON
// whitespace.
func Space(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Skip reads the JSON value starting at b[i] (no leading whitespace) and
// returns the index after it. Invalid UTF-8 in strings is accepted, as
// encoding/json accepts it; duplicate names are not looked for.
func Skip(b []byte, i int) (int, bool) {
	return skip(b, i, 0)
}

func skip(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; c {
	case '"':
		end, _, _, ok := stringEnd(b, i)
		return end, ok
	case '{':
		if depth >= maxDepth {
			return i, false
		}
		return Object(b, i, func(_ []byte, v int) (int, bool) { return skip(b, v, depth+1) })
	case '[':
		if depth >= maxDepth {
			return i, false
		}
		return Array(b, i, func(v int) (int, bool) { return skip(b, v, depth+1) })
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	}
	return number(b, i)
}

// next reads what follows a container's member or element at b[i]: a
// comma (more, i after it and its whitespace) or the container's last
// byte (i after it).
func next(b []byte, i int, last byte) (int, bool, bool) {
	if i = Space(b, i); i >= len(b) {
		return i, false, false
	}
	switch b[i] {
	case ',':
		return Space(b, i+1), true, true
	case last:
		return i + 1, false, true
	}
	return i, false, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func number(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringEnd reads the JSON string starting at b[i] (a quote) and returns
// the index after its closing quote; escaped says it has escapes, high
// that it has bytes outside ASCII. Escapes are checked, UTF-8 is not.
func stringEnd(b []byte, i int) (end int, escaped, high bool, ok bool) {
	i++
	for {
		// eight bytes at a time up to the first that ends a plain run:
		// a byte < 0x20, '"' or '\\' (the has-less-than and has-zero-byte
		// tricks: a borrow can flag bytes above the first true one, never
		// below it, so the lowest flag is exact)
		for len(b)-i >= 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			q, bs := w^(ones*'"'), w^(ones*'\\')
			hit := ((w - ones*0x20) | (q - ones) | (bs - ones)) &^ w & highs
			high = high || w&highs != 0
			if hit != 0 {
				i += bits.TrailingZeros64(hit) / 8
				break
			}
			i += 8
		}
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			high = high || b[i] >= 0x80
			i++
		}
		if i >= len(b) {
			return i, escaped, high, false
		}
		switch b[i] {
		case '"':
			return i + 1, escaped, high, true
		case '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, high, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b, i+2); !ok {
					return i, escaped, high, false
				}
				i += 6
			default:
				return i, escaped, high, false
			}
		default: // a control character
			return i, escaped, high, false
		}
	}
}

func hex4(b []byte, i int) (rune, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// String decodes the JSON string starting at b[i] (a quote) as
// encoding/json decodes it into a string (invalid UTF-8 and lone
// surrogates replaced by U+FFFD) and returns the index after it. The
// string is a copy: it keeps nothing of b alive.
func String(b []byte, i int) (string, int, bool) {
	end, escaped, high, ok := stringEnd(b, i)
	if !ok {
		return "", end, false
	}
	body := b[i+1 : end-1]
	if !escaped {
		if high && !utf8.Valid(body) {
			return unquote(b[i:end]), end, true
		}
		return string(body), end, true
	}
	out := make([]byte, 0, len(body))
	for k := 0; k < len(body); {
		j := bytes.IndexByte(body[k:], '\\')
		if j < 0 {
			out = append(out, body[k:]...)
			break
		}
		j += k
		out = append(out, body[k:j]...)
		switch c := body[j+1]; c {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(body, j+2) // checked by stringEnd
			if utf16Surrogate(r) {
				// pairs and lone halves: the decoder's own rules
				return unquote(b[i:end]), end, true
			}
			out = utf8.AppendRune(out, r)
			k = j + 6
			continue
		default: // '"', '\\', '/'
			out = append(out, c)
		}
		k = j + 2
	}
	// escapes add only whole UTF-8 sequences, each starting with a byte
	// no sequence continues with: out is valid UTF-8 exactly when every
	// run between escapes is
	if high && !utf8.Valid(out) {
		return unquote(b[i:end]), end, true
	}
	return unsafe.String(unsafe.SliceData(out), len(out)), end, true // out is never written again
}

func utf16Surrogate(r rune) bool { return 0xd800 <= r && r <= 0xdfff }

// unquote is the quoted JSON string raw (valid) decoded by the decoder
// itself, invalid UTF-8 replaced.
func unquote(raw []byte) string {
	out, _ := jsontext.AppendUnquote(make([]byte, 0, len(raw)), raw) // the only error is invalid UTF-8, replaced
	return unsafe.String(unsafe.SliceData(out), len(out))
}

// Object reads the JSON object starting at b[i] (a '{'), calling member
// for each member with its name as written (between the quotes, escapes
// not decoded) and the index of its value (no leading whitespace);
// member returns the index after the value (a value is never at the
// end of b). It returns the index after
// the object.
func Object(b []byte, i int, member func(name []byte, v int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false
	}
	i = Space(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		end, _, _, ok := stringEnd(b, i)
		if !ok {
			return end, false
		}
		name := b[i+1 : end-1]
		if i = Space(b, end); i >= len(b) || b[i] != ':' {
			return i, false
		}
		if i = Space(b, i+1); i >= len(b) {
			return i, false
		}
		if i, ok = member(name, i); !ok {
			return i, false
		}
		var more bool
		if i, more, ok = next(b, i, '}'); !more {
			return i, ok
		}
	}
}

// Array reads the JSON array starting at b[i] (a '['), calling elem with
// the index of each element (no leading whitespace); elem returns the
// index after the element (an element is never at the end of b). It returns the index after the array.
func Array(b []byte, i int, elem func(v int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return i, false
	}
	i = Space(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i >= len(b) {
			return i, false
		}
		if i, ok = elem(i); !ok {
			return i, false
		}
		var more bool
		if i, more, ok = next(b, i, ']'); !more {
			return i, ok
		}
	}
}
