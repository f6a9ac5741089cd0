package jsondec

import (
	"encoding/json"
	"reflect"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Unmarshal is json.Unmarshal(data, v), about twice as fast where the
// input is accepted. v must be a non-nil pointer.
func Unmarshal(data []byte, v any) error {
	if jsonv1.Unmarshal(data, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return json.Unmarshal(data, v)
}
