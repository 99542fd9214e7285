package analysis

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/tracer-dev/tracer/trace"
)

// The hand-written JSON of Site and Bucket keeps every field: a field added
// to either without a key in its MarshalJSON fails here.
func TestJSONHasEveryField(t *testing.T) {
	snake := regexp.MustCompile(`([a-z0-9])([A-Z])`)
	for _, v := range []any{Site{Stack: 3, Frames: []trace.Frame{{Name: "f"}}}, Bucket{}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		typ := reflect.TypeOf(v)
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if key == "" {
				key = strings.ToLower(snake.ReplaceAllString(f.Name, "${1}_$2"))
			}
			if _, ok := m[key]; !ok && key != "-" {
				t.Errorf("%s.%s: no %q in %s", typ.Name(), f.Name, key, b)
			}
		}
	}
}
