// Package outfile writes the commands' output files so that an output is
// never half-written and never replaces an input.
//
// An output path that names a regular file, or nothing yet, is written to
// a temporary file in its directory that Commit puts into place whole: on
// Linux an unnamed O_TMPFILE file, linked in at the end, so that a killed
// command leaves nothing; elsewhere (or on a file system without O_TMPFILE)
// a hidden file named after the output and the process, which the next
// Create for that output removes once its process is gone. Of several
// commands writing one output at once, the last to finish wins, whole.
//
// A symbolic link at the path is replaced, not written through, as mv
// does, unless it leads to something that is not a regular file. Paths that
// are not regular files (a device such as /dev/null, a FIFO, a socket, and
// "-" for standard output) are never renamed over: the output is made in an
// unnamed temporary file (os.TempDir) and copied to them at Commit.
package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stdout is the output path that means standard output.
const Stdout = "-"

// errUnsupported is openUnnamed's answer where files cannot be unnamed.
var errUnsupported = errors.New("outfile: no unnamed files here")

// noUnnamed makes Create use its fallback, a named hidden file (tests).
var noUnnamed bool

// File is an output being written. Write to File(); then Commit, or Abort.
type File struct {
	f      *os.File
	path   string
	direct bool   // path is not a regular file: f is copied to it at Commit
	tmp    string // f's name when it has one ("" for an unnamed O_TMPFILE file)
	keep   bool   // a partial recording: kept where Commit fails
	done   bool
}

// Create starts writing the output path (see the package comment).
func Create(path string) (*File, error) { return create(path, false) }

// CreatePartial starts writing the output path through a visible file
// beside it, PartialPattern(path), which Commit renames to path: a live
// recording, which cannot be made again, keeps what it wrote there if the
// process is killed. A path that is not a regular file is written as by
// Create.
func CreatePartial(path string) (*File, error) { return create(path, true) }

func create(path string, partial bool) (*File, error) {
	if path == "" {
		return nil, errors.New("no output path")
	}
	if Direct(path) {
		f, err := anonymous(os.TempDir())
		if err != nil {
			return nil, err
		}
		return &File{f: f, path: path, direct: true}, nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	if partial {
		ext := filepath.Ext(base)
		f, err := os.CreateTemp(dir, strings.TrimSuffix(base, ext)+".partial-*"+ext)
		if err != nil {
			return nil, err
		}
		if err := f.Chmod(0o644); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
		return &File{f: f, path: path, tmp: f.Name(), keep: true}, nil
	}
	f, err := openUnnamed(dir)
	if noUnnamed {
		f.Close()
		err = errUnsupported
	}
	if err == nil {
		return &File{f: f, path: path}, nil
	}
	if !errors.Is(err, errUnsupported) {
		return nil, err // no such folder, no permission: say so
	}
	removeStale(dir, base)
	f, err = os.CreateTemp(dir, tempPrefix(base)+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp's file is private; an output is not
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{f: f, path: path, tmp: f.Name()}, nil
}

// PartialPattern describes the name of a partial recording of path, for
// messages: trace.arrows is recorded into trace.partial-*.arrows.
func PartialPattern(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".partial-*" + ext
}

// File is the file to write: always a regular file, which may be read
// back and written at any offset.
func (f *File) File() *os.File { return f.f }

// Name is the output's path.
func (f *File) Name() string { return f.path }

// Partial is the name of the partial recording being written, "" when
// the output is not written through one.
func (f *File) Partial() string {
	if f.keep {
		return f.tmp
	}
	return ""
}

// Commit closes the file and puts it at its path, whole. A partial
// recording that cannot be renamed stays where it is, and the error says
// where; any other failed Commit leaves nothing behind.
func (f *File) Commit() error {
	if f.done {
		return errors.New("outfile: already committed or aborted")
	}
	f.done = true
	switch {
	case f.direct:
		err := copyTo(f.f, f.path)
		f.f.Close()
		return err
	case f.tmp == "":
		err := link(f.f, f.path)
		if cerr := f.f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	err := f.f.Close()
	if err == nil {
		removeOld(f.path)
		err = os.Rename(f.tmp, f.path)
	}
	if err != nil {
		if f.keep {
			return fmt.Errorf("%w (what was written is in %s)", err, f.tmp)
		}
		os.Remove(f.tmp)
	}
	return err
}

// Abort discards the output: nothing appears at its path. It does nothing
// after Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.f.Close()
	if f.tmp != "" {
		os.Remove(f.tmp)
	}
}

// Direct reports whether path is written directly, not replaced: "-", or
// an existing path (through symbolic links) that is neither a regular file
// nor a directory.
func Direct(path string) bool {
	if path == Stdout {
		return true
	}
	st, err := os.Stat(path)
	return err == nil && !st.Mode().IsRegular() && !st.IsDir()
}

// ScratchDir is where scratch files that go with the output path belong:
// its directory, or os.TempDir() when the output is written directly.
func ScratchDir(path string) string {
	if Direct(path) {
		return os.TempDir()
	}
	return filepath.Dir(path)
}

// copyTo copies f, from its start, to the device, pipe or standard output
// at path, opened without creating or truncating anything.
func copyTo(f *os.File, path string) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	dst := os.Stdout
	if path != Stdout {
		var err error
		if dst, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
			return err
		}
		defer dst.Close()
	}
	_, err := io.Copy(struct{ io.Writer }{dst}, f) // no copy_file_range: dst is no regular file
	return err
}

// removeOld unlinks a regular file or a symbolic link at path before the
// new output takes its place. Renamed over, an existing file makes ext4
// (auto_da_alloc) write the new one out within the rename, which costs as
// long as writing the file; between the unlink and the rename nothing is at
// path, as while any output is written.
func removeOld(path string) {
	if st, err := os.Lstat(path); err == nil && (st.Mode().IsRegular() || st.Mode()&os.ModeSymlink != 0) {
		os.Remove(path) // if this fails, the rename replaces it as before
	}
}

// tempPrefix begins the names of the hidden temporary files of an output
// named base, followed by the writer's process id.
func tempPrefix(base string) string { return "." + base + ".tracer-" }

// removeStale removes the hidden temporary files that processes no longer
// running left for the output base in dir (killed while writing it, where
// the file could not be unnamed).
func removeStale(dir, base string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := tempPrefix(base)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if n, err := strconv.Atoi(pid); err == nil && n > 0 && n != os.Getpid() && !running(n) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// ConflictError is an output that would replace one of the command's
// inputs, or another of its outputs: a mistake in the command line.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// Check refuses an output that is one of the inputs: the same file, by
// name, hard link or symbolic link, not only the same name. An output
// written directly (a device, a pipe) replaces nothing and passes, unless
// it leads to an input's regular file (/dev/stdout redirected to it).
func Check(out string, inputs ...string) error {
	if out == "" {
		return nil
	}
	var st, lst os.FileInfo
	if out == Stdout {
		st, _ = os.Stdout.Stat()
	} else {
		st, _ = os.Stat(out)
		lst, _ = os.Lstat(out)
	}
	if st != nil && !st.Mode().IsRegular() {
		return nil
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		same := out != Stdout && filepath.Clean(out) == filepath.Clean(in)
		if ist, err := os.Stat(in); !same && err == nil && st != nil {
			same = os.SameFile(st, ist)
		}
		if ilst, err := os.Lstat(in); !same && err == nil && lst != nil {
			same = os.SameFile(lst, ilst)
		}
		if same {
			return &ConflictError{fmt.Sprintf("output %s is the input %s, which it would replace: choose another output", out, in)}
		}
	}
	return nil
}
