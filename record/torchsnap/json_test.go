package torchsnap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// refDecodeJSON decodes JSON through encoding/json's token API: the
// reference decodeJSON must agree with.
func refDecodeJSON(r io.Reader, b *builder) (value, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	v, err := refJSONValue(dec, b, 0)
	if err != nil {
		return value{}, fmt.Errorf("json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return value{}, errors.New("json: data after the top-level value")
	}
	return b.settle(v)
}

func refJSONValue(dec *json.Decoder, b *builder, depth int) (value, error) {
	if depth > maxJSONDepth {
		return value{}, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return value{}, err
	}
	switch t := tok.(type) {
	case nil:
		return value{}, nil
	case bool:
		return boolValue(t), nil
	case string:
		return b.internString(t), nil
	case json.Number:
		return jsonNumber([]byte(t)), nil
	case json.Delim:
		var c value
		if t == '{' {
			c = b.newDict()
		} else {
			c = b.newList(vList, nil)
		}
		for dec.More() {
			var k string
			if t == '{' {
				kt, err := dec.Token()
				if err != nil {
					return value{}, err
				}
				k = kt.(string)
			}
			v, err := refJSONValue(dec, b, depth+1)
			if err != nil {
				return value{}, err
			}
			if t == '{' {
				err = b.setItem(c, b.internString(k), v)
			} else {
				err = b.appendItem(c, v)
			}
			if err != nil {
				return value{}, err
			}
		}
		if _, err := dec.Token(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return value{}, err
		}
		return c, nil
	}
	return value{}, fmt.Errorf("unexpected token %v", tok)
}

// decodeJSONWith decodes data with dec into a snapshot, and returns the
// builder's strings beside it: their order is the order strings appeared in.
func decodeJSONWith(data []byte, dec func(io.Reader, *builder) (value, error)) (*Snapshot, []string, error) {
	b := newBuilder()
	b.events.sizeFor(int64(len(data)))
	b.memo.sizeFor(int64(len(data)))
	top, err := dec(bytes.NewReader(data), b)
	if err != nil {
		return nil, nil, err
	}
	s, err := b.assemble(top)
	return s, b.strs, err
}

func checkJSONAgrees(t *testing.T, data []byte) {
	t.Helper()
	got, gotStrs, err := decodeJSONWith(data, decodeJSON)
	want, wantStrs, wantErr := decodeJSONWith(data, refDecodeJSON)
	// Both fail, with the same message but where encoding/json's token API
	// names a syntax error less precisely than its scanner does (the
	// scanner's wording is what decodeJSON uses), or says "EOF" of a file
	// cut after a comma.
	if (err != nil) != (wantErr != nil) ||
		err != nil && fmt.Sprint(err) != fmt.Sprint(wantErr) && !strings.HasPrefix(wantErr.Error(), "json: invalid character") &&
			!(wantErr.Error() == "json: EOF" && err.Error() == "json: unexpected EOF") {
		t.Fatalf("%.80q: error %v, encoding/json's %v", data, err, wantErr)
	}
	if err != nil {
		return
	}
	if !reflect.DeepEqual(gotStrs, wantStrs) {
		t.Fatalf("%.80q: strings %q, encoding/json's %q", data, gotStrs, wantStrs)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%.80q: the snapshots differ", data)
	}
}

var jsonSeeds = []string{
	`{"segments": []}`,
	`{"segments": [], "device_traces": [[]]}`,
	`{"segments": [{"address": 0, "total_size": 512, "stream": 0, "blocks": [{"size": 512, "state": "active_allocated", "frames": [{"filename": "a\u00e9\ud83d\ude00\ud800x\\\"\/\b\f\n\r\t", "line": 3, "name": "f"}]}]}]}`,
	`{"segments": [{"address": 0, "total_size": 512, "blocks": [{"size": 512, "state": "weird"}]}]}`,
	"{\"segments\": [], \"x\": \"\xff\xfe\xed\xa0\x80 \xe2\x82\"}",
	`{"segments": [], "n": [0, -0, 1.5, -2e10, 1E400, 18446744073709551615, 18446744073709551616, 123456789012345678, -9223372036854775808, true, false, null]}`,
	`{"segments": [], "a": {"b": {"c": []}}}`,
	`{"segments": [`,
	`{"segments": []} x`,
	`{"segments": []} {}`,
	`{"segments": [01]}`,
	`{"segments": [1.]}`,
	`{"segments": [1ex]}`,
	`{"segments": [1e+]}`,
	`{"segments": [1.5e-3, 2E+2]}`,
	`{"segments": [-]}`,
	`{"segments": [1,]}`,
	`{"segments": [], }`,
	`{"segments" []}`,
	`{"segments": [tru]}`,
	`{"segments": ["\x"]}`,
	`{"segments": ["\u12G4"]}`,
	"{\"segments\": [\"a\nb\"]}",
	`[1, 2]`,
	`[{"address": 0}]`,
}

// TestJSON_agrees: decodeJSON decodes as encoding/json does, on the
// snapshots in JSON form and on inputs that reach each of its branches.
func TestJSON_agrees(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no JSON snapshots in testdata")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkJSONAgrees(t, data)
	}
	for _, s := range jsonSeeds {
		checkJSONAgrees(t, []byte(s))
	}
}

// TestJSON_refills: strings, escapes, numbers and literals cut by the
// buffer's refills decode as whole ones.
func TestJSON_refills(t *testing.T) {
	data, err := os.ReadFile("testdata/attention.json")
	if err != nil {
		t.Fatal(err)
	}
	want, wantStrs, err := decodeJSONWith(data, decodeJSON)
	if err != nil {
		t.Fatal(err)
	}
	tiny := func(r io.Reader, b *builder) (value, error) {
		return decodeJSON(io.LimitReader(oneByteReader{r}, int64(len(data))), b)
	}
	got, gotStrs, err := decodeJSONWith(data, tiny)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotStrs, wantStrs) || !reflect.DeepEqual(got, want) {
		t.Fatal("read a byte at a time, the snapshot differs")
	}
	for _, s := range jsonSeeds {
		_, _, err1 := decodeJSONWith([]byte(s), decodeJSON)
		_, _, err2 := decodeJSONWith([]byte(s), tiny)
		if fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Errorf("%q: %v, a byte at a time %v", s, err1, err2)
		}
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func FuzzJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '{' && data[0] != '[' {
			return // sniff sends only these to decodeJSON
		}
		checkJSONAgrees(t, data)
	})
}

// BenchmarkJSON decodes MemoryViz's JSON form of a real snapshot, with the
// scanner and with encoding/json's token API.
func BenchmarkJSON(b *testing.B) {
	data, err := os.ReadFile("testdata/attention.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dec  func(io.Reader, *builder) (value, error)
	}{{"scanner", decodeJSON}, {"encoding-json", refDecodeJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, _, err := decodeJSONWith(data, c.dec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
