package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// asyncFile writes every byte handed to it, in order, across blocks, and
// reports a failing file instead of losing the data silently.
func TestAsyncFile(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (3*asyncBlock+12345)/16)
	t.Run("in order", func(t *testing.T) {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		o := newAsyncFile(f, asyncBlocks, liveSyncEvery)
		for p := data; len(p) > 0; {
			n := min(len(p), 1000+len(p)%7777) // uneven pieces, across blocks
			if _, err := o.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if err := o.finish(); err != nil {
			t.Fatal(err)
		}
		if err := o.finish(); err != nil { // a second finish is harmless
			t.Fatal(err)
		}
		got, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
		}
	})
	t.Run("push", func(t *testing.T) {
		// A pushed block reaches the file without waiting to be full.
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		o := newAsyncFile(f, liveBlocks, liveSyncEvery)
		defer o.finish()
		o.Write(data[:1000])
		o.push()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if got, _ := os.ReadFile(f.Name()); bytes.Equal(got, data[:1000]) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a pushed block did not reach the file")
			}
		}
	})
	t.Run("write error", func(t *testing.T) {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		o := newAsyncFile(f, asyncBlocks, liveSyncEvery)
		f.Close() // every write fails from here
		var werr error
		for i := 0; i < 100 && werr == nil; i++ {
			_, werr = o.Write(data)
		}
		if werr == nil {
			t.Error("writes to a closed file kept succeeding")
		}
		if err := o.finish(); err == nil {
			t.Error("finish reported no error")
		}
	})
}
