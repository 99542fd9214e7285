package outfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// procFD is where an unnamed file is found by its descriptor, to link it:
// linkat(2) on /proc/self/fd/N with AT_SYMLINK_FOLLOW needs no privilege
// (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH).
const procFD = "/proc/self/fd/"

var procOK = sync.OnceValue(func() bool {
	_, err := os.Stat(procFD)
	return err == nil
})

// openUnnamed opens an unnamed regular file in dir (O_TMPFILE): nothing of
// it remains if the process dies before link.
func openUnnamed(dir string) (*os.File, error) {
	if !procOK() {
		return nil, errUnsupported
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL):
		return nil, errUnsupported // a file system (or kernel) without O_TMPFILE
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed)")), nil
}

// anonymous opens a scratch file in dir that has no name, or loses it at
// once where O_TMPFILE is not there.
func anonymous(dir string) (*os.File, error) {
	if f, err := openUnnamed(dir); err == nil {
		return f, nil
	}
	f, err := os.CreateTemp(dir, ".tracer-out-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// link gives the unnamed file f the name path, replacing what is there.
func link(f *os.File, path string) error {
	removeOld(path)
	from := procFD + strconv.Itoa(int(f.Fd()))
	err := unix.Linkat(unix.AT_FDCWD, from, unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if !errors.Is(err, unix.EEXIST) {
		if err != nil {
			return &os.LinkError{Op: "link", Old: "(unnamed)", New: path, Err: err}
		}
		return nil
	}
	// Another writer's output took the path since: link beside it, then
	// rename over it (the last to finish wins).
	dir, base := filepath.Dir(path), filepath.Base(path)
	for i := 0; ; i++ {
		tmp := filepath.Join(dir, fmt.Sprintf("%s%d-%d", tempPrefix(base), os.Getpid(), i))
		err = unix.Linkat(unix.AT_FDCWD, from, unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW)
		if err == nil {
			if err = os.Rename(tmp, path); err != nil {
				os.Remove(tmp)
			}
			return err
		}
		if !errors.Is(err, unix.EEXIST) || i == 100 {
			return &os.LinkError{Op: "link", Old: "(unnamed)", New: tmp, Err: err}
		}
	}
}

// running reports whether process pid exists.
func running(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
