package rules

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/rollcage/rollcage/toolcall"
)

// toValue converts plain Go data (the monitor's ToolCall and Normalized,
// maps, slices) to an ast.Value the way a JSON round trip would, but
// directly: ast.InterfaceToValue marshals and unmarshals through
// encoding/json, which was half of a tool call's cost in the monitor.
// Types it does not know (custom marshalers, embedded structs) take the
// JSON round trip. TestToValueMatchesJSON holds the two paths equal.
func toValue(x any) (ast.Value, error) {
	if x == nil {
		return ast.NewObject(), nil
	}
	switch v := x.(type) {
	case ast.Value:
		return v, nil
	case toolcall.Normalized:
		return normalizedValue(&v), nil
	case *toolcall.Normalized:
		if v != nil {
			return normalizedValue(v), nil
		}
	}
	rv := reflect.ValueOf(x)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		// maps and slices at the top: ast.InterfaceToValue handles the
		// common ones natively (and a nil slice there is [], not null)
		return ast.InterfaceToValue(x)
	}
	return fastValue(rv)
}

// normalizedValue is fastValue of a normalized call, written out: every
// call the rules see is one, and reflection (field by field, a Value and a
// method-set test per field) cost as much as the terms themselves. The
// fields are encoding/json's, in order: omitempty ones left out when
// empty, a nil list that is not omitempty null
// (TestNormalizedValueMatchesJSON sets every field by reflection, so a
// field added to toolcall.Normalized and not here fails it).
func normalizedValue(n *toolcall.Normalized) ast.Value {
	o := make(fields, 0, 8)
	o.str("tool", n.Tool, false)
	o.str("raw", n.Raw, false)
	o.flag("unparsed", n.Unparsed)
	o.str("parse_error", n.ParseError, true)
	o.str("cwd", n.Cwd, true)
	if len(n.Commands) > 0 {
		o.add("commands", objects(n.Commands, func(c toolcall.Command, co *fields) {
			co.str("name", c.Name, false)
			co.list("argv", c.Argv, false)
			co.str("via", c.Via, true)
		}))
	}
	for _, l := range [...]struct {
		k string
		l []string
	}{{"reads", n.Reads}, {"writes", n.Writes}, {"deletes", n.Deletes}, {"lists", n.Lists}, {"hosts", n.Hosts}, {"urls", n.URLs}} {
		o.list(l.k, l.l, true)
	}
	if len(n.Git) > 0 {
		o.add("git", objects(n.Git, func(g toolcall.GitOp, op *fields) {
			op.str("sub", g.Sub, false)
			op.list("args", g.Args, false)
			op.list("flags", g.Flags, true)
			op.list("refs", g.Refs, true)
			op.flag("all_refs", g.AllRefs)
		}))
	}
	o.list("packages", n.Packages, true)
	o.str("content", n.Content, true)
	o.str("old_content", n.OldContent, true)
	o.list("scripts", n.Scripts, true)
	if len(n.Env) > 0 {
		env := make(fields, 0, len(n.Env))
		for k, v := range n.Env {
			env.str(k, v, false)
		}
		o.add("env", env.object())
	}
	return o.object()
}

// fields are an object's items as encoding/json writes them, in order.
type fields [][2]*ast.Term

func (f *fields) add(k string, v ast.Value) {
	*f = append(*f, [2]*ast.Term{ast.StringTerm(k), ast.NewTerm(v)})
}

// str adds a string field; omit: omitempty.
func (f *fields) str(k, s string, omit bool) {
	if !omit || s != "" {
		f.add(k, ast.String(s))
	}
}

// list adds a list of strings; omit: omitempty.
func (f *fields) list(k string, l []string, omit bool) {
	if !omit || len(l) > 0 {
		f.add(k, stringArray(l))
	}
}

// flag adds an omitempty bool.
func (f *fields) flag(k string, b bool) {
	if b {
		f.add(k, ast.Boolean(true))
	}
}

func (f fields) object() ast.Value { return ast.NewObject(f...) }

// objects is an array of one object per element of xs, its fields added
// by fn.
func objects[T any](xs []T, fn func(T, *fields)) ast.Value {
	ts := make([]*ast.Term, len(xs))
	for i, x := range xs {
		f := make(fields, 0, 5)
		fn(x, &f)
		ts[i] = ast.NewTerm(f.object())
	}
	return ast.NewArray(ts...)
}

// stringArray is a list of strings as JSON has it: null when nil.
func stringArray(l []string) ast.Value {
	if l == nil {
		return ast.Null{}
	}
	ts := make([]*ast.Term, len(l))
	for i, s := range l {
		ts[i] = ast.StringTerm(s)
	}
	return ast.NewArray(ts...)
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	marshalerType  = reflect.TypeFor[json.Marshaler]()
	textType       = reflect.TypeFor[encoding.TextMarshaler]()
)

func slowValue(v reflect.Value) (ast.Value, error) {
	return ast.InterfaceToValue(v.Interface())
}

func fastValue(v reflect.Value) (ast.Value, error) {
	t := v.Type()
	if t == rawMessageType {
		raw := v.Bytes()
		if len(raw) == 0 {
			return ast.Null{}, nil
		}
		var x any
		if err := util.UnmarshalJSON(raw, &x); err != nil {
			return nil, err
		}
		return ast.InterfaceToValue(x)
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && (t.Implements(marshalerType) || t.Implements(textType)) {
		return slowValue(v)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ast.Null{}, nil
		}
		return fastValue(v.Elem())
	case reflect.String:
		return ast.String(v.String()), nil
	case reflect.Bool:
		return ast.Boolean(v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return ast.Number(strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return ast.Number(strconv.FormatUint(v.Uint(), 10)), nil
	case reflect.Slice:
		if v.IsNil() {
			return ast.Null{}, nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return slowValue(v) // []byte is base64 in JSON
		}
		fallthrough
	case reflect.Array:
		terms := make([]*ast.Term, v.Len())
		for i := range terms {
			e, err := fastValue(v.Index(i))
			if err != nil {
				return nil, err
			}
			terms[i] = ast.NewTerm(e)
		}
		return ast.NewArray(terms...), nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return slowValue(v)
		}
		if v.IsNil() {
			return ast.Null{}, nil
		}
		items := make([][2]*ast.Term, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			e, err := fastValue(it.Value())
			if err != nil {
				return nil, err
			}
			items = append(items, [2]*ast.Term{ast.StringTerm(it.Key().String()), ast.NewTerm(e)})
		}
		return ast.NewObject(items...), nil
	case reflect.Struct:
		fields, ok := structFields(t)
		if !ok {
			return slowValue(v)
		}
		items := make([][2]*ast.Term, 0, len(fields))
		for _, f := range fields {
			fv := v.Field(f.index)
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			e, err := fastValue(fv)
			if err != nil {
				return nil, err
			}
			items = append(items, [2]*ast.Term{ast.StringTerm(f.name), ast.NewTerm(e)})
		}
		return ast.NewObject(items...), nil
	}
	return slowValue(v) // floats, funcs, anything rarer: exactly what JSON does
}

// isEmpty is encoding/json's notion of empty for omitempty (a struct is
// never empty).
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Pointer, reflect.Interface:
		return v.IsZero()
	}
	return false
}

type fieldInfo struct {
	index     int
	name      string
	omitEmpty bool
}

type structInfo struct {
	fields []fieldInfo
	ok     bool // false: a field the fast path does not handle (embedded, string option)
}

var structCache sync.Map // reflect.Type → structInfo

func structFields(t reflect.Type) ([]fieldInfo, bool) {
	if c, ok := structCache.Load(t); ok {
		si := c.(structInfo)
		return si.fields, si.ok
	}
	si := structInfo{ok: true}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			si.ok = false
			break
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		if strings.Contains(opts, "string") {
			si.ok = false
			break
		}
		si.fields = append(si.fields, fieldInfo{index: i, name: name, omitEmpty: strings.Contains(opts, "omitempty")})
	}
	structCache.Store(t, si)
	return si.fields, si.ok
}

// checkRaw reports what toValue would fail on in a call it does not
// convert: a json.RawMessage field (a tool call's arguments) that is not
// JSON.
func checkRaw(x any) error {
	rv := reflect.ValueOf(x)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	for i := range rv.NumField() {
		f := rv.Field(i)
		if f.Type() == rawMessageType && f.Len() > 0 && !quickValid(f.Bytes()) && !json.Valid(f.Bytes()) {
			return fmt.Errorf("%s: not JSON", rv.Type().Field(i).Name)
		}
	}
	return nil
}

// quickValid reports whether b is one JSON value, read with jsontext
// rather than encoding/json's state function per byte: every call's
// arguments are checked, and they are mostly long strings. It accepts
// what json.Valid accepts (invalid UTF-8 and duplicate names among it);
// it is still one-sided: what it does not accept, json.Valid decides.
func quickValid(b []byte) bool {
	return jsontext.Value(b).IsValid(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}
