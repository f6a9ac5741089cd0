package rules

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
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
	if v, ok := x.(ast.Value); ok {
		return v, nil
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
		if f.Type() == rawMessageType && f.Len() > 0 && !json.Valid(f.Bytes()) {
			return fmt.Errorf("%s: not JSON", rv.Type().Field(i).Name)
		}
	}
	return nil
}
