package record

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestOutFile(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (3*outBuf+12345)/16)
	listing := func(dir string) []string {
		m, _ := filepath.Glob(filepath.Join(dir, "*"))
		h, _ := filepath.Glob(filepath.Join(dir, ".*"))
		return append(m, h...)
	}
	t.Run("commit", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "out.arrows")
		o, err := createOut(path)
		if err != nil {
			t.Fatal(err)
		}
		for p := data; len(p) > 0; {
			n := min(len(p), 1000+len(p)%7777) // uneven pieces, across blocks
			if _, err := o.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if err := o.commit(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
			t.Errorf("mode %v, want 0644", st.Mode().Perm())
		}
		if l := listing(dir); len(l) != 1 {
			t.Errorf("files left: %v", l)
		}
	})
	t.Run("abort", func(t *testing.T) {
		dir := t.TempDir()
		o, err := createOut(filepath.Join(dir, "out.arrows"))
		if err != nil {
			t.Fatal(err)
		}
		o.Write(data)
		o.abort()
		if l := listing(dir); len(l) != 0 {
			t.Errorf("files left: %v", l)
		}
	})
	t.Run("write error", func(t *testing.T) {
		dir := t.TempDir()
		o, err := createOut(filepath.Join(dir, "out.arrows"))
		if err != nil {
			t.Fatal(err)
		}
		o.f.Close() // every write fails from here
		var werr error
		for i := 0; i < 100 && werr == nil; i++ {
			_, werr = o.Write(data)
		}
		if werr == nil {
			t.Error("writes to a closed file kept succeeding")
		}
		if err := o.commit(); err == nil {
			t.Error("commit succeeded")
		}
		if l := listing(dir); len(l) != 0 {
			t.Errorf("files left: %v", l)
		}
	})
	t.Run("create error", func(t *testing.T) {
		_, err := createOut(filepath.Join(t.TempDir(), "missing", "out.arrows"))
		if err == nil {
			t.Fatal("no error")
		}
	})
}
