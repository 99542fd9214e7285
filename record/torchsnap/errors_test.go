package torchsnap

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecode_badInput: every malformed input gets one clear error.
func TestDecode_badInput(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty file"},
		{"blank", " \n", "empty file"},
		{"text", "hello, world\n", "neither a pickle (protocols 2 to 5) nor JSON"},
		{"protocol0", "(lp0\nI1\naI2\na.", "a pickle of protocol 0 or 1 (starts with '('); tracer reads pickle protocols 2 to 5"},
		{"protocol0_dict", "(dp0\nVsegments\np1\n(lp2\nsS'device_traces'\np3\n(lp4\ns.", "a pickle of protocol 0 or 1"},
		{"protocol1_dict", "}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02u.", "a pickle of protocol 0 or 1 (starts with '}')"},
		{"protocol1_list", "]q\x00.", "a pickle of protocol 0 or 1"},
		{"protocol1", "\x80\x01]q\x00.", "protocol 1 is not supported"},
		{"proto_only", "\x80\x04", "truncated pickle"},
		{"no_stop", "\x80\x04]\x94(K\x01K\x02e", "truncated pickle"},
		{"mid_opcode", "\x80\x04\x8c\x05ab", "truncated pickle"},
		{"huge_length", "\x80\x04X\xff\xff\xff\x7fabc", "truncated pickle"},
		{"huge_length8", "\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7fabc", "truncated pickle"},
		{"list_of_ints", "\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00]\x94(K\x01K\x02K\x03e.", "segments[0] is a int, want a segment dict"},
		{"other_dict", "\x80\x04\x95\n\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94K\x01s.", "neither device_traces nor segments"},
		{"int", "\x80\x04K\x01.", "the top level is a int"},
		{"segments_of_ints", "\x80\x04\x95\x14\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94K\x01as.", "segments[0] is a int"},
		{"bad_addr", "\x80\x04\x95:\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\rdevice_traces\x94]\x94]\x94}\x94(\x8c\x06action\x94\x8c\x05alloc\x94\x8c\x04addr\x94\x8c\x01x\x94uaas.", "trace entry: addr is a str, want int"},
		{"global", "\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01.", "class GLOBAL collections.OrderedDict"},
		{"stack_global", "\x80\x04\x95\"\x00\x00\x00\x00\x00\x00\x00\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94.", "STACK_GLOBAL"},
		{"reduce", "\x80\x04)R.", "builds objects"},
		{"bad_memo", "\x80\x04h\x05.", "memo index 5 was never stored"},
		{"underflow", "\x80\x04s.", "stack underflow"},
		{"json_number", "[1, 2]", "segments[0] is a int"},
		{"json_object", `{"a": 1}`, "neither device_traces nor segments"},
		{"json_truncated", `{"segments": [`, "json: unexpected EOF"},
		{"json_trailing", `{"segments": []} x`, "data after the top-level value"},
		{"json_bad_state", `{"segments": [{"address": 0, "total_size": 512, "blocks": [{"size": 512, "state": "weird"}]}]}`, `"weird" is not a known block state`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(c.in))
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.HasPrefix(err.Error(), "torchsnap: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want one containing %q", err, c.want)
			}
		})
	}
}

// TestReadFile_namesFile: errors name the file.
func TestReadFile_namesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pickle")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	if err == nil || !strings.HasPrefix(err.Error(), "torchsnap: "+path+": ") {
		t.Errorf("error %v", err)
	}
}

// TestDecode_prefixes: every truncation of a real snapshot is an error, never
// a panic or a partial success.
func TestDecode_prefixes(t *testing.T) {
	data, err := os.ReadFile("testdata/oom_p2.pickle")
	if err != nil {
		t.Fatal(err)
	}
	step := 7
	if testing.Short() {
		step = 97
	}
	for n := 0; n < len(data); n += step {
		if _, err := Decode(bytes.NewReader(data[:n])); err == nil {
			t.Fatalf("prefix of %d bytes decoded without error", n)
		}
	}
}

// TestDecode_corrupt flips random bytes of a real snapshot: errors are fine,
// panics are not.
func TestDecode_corrupt(t *testing.T) {
	data, err := os.ReadFile("testdata/oom_p5.pickle")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, len(data))
	for i := 0; i < 300; i++ {
		copy(buf, data)
		for j := 0; j < 1+rng.Intn(8); j++ {
			buf[rng.Intn(len(buf))] = byte(rng.Intn(256))
		}
		Decode(bytes.NewReader(buf))
	}
}
