//go:build !cgo

package cuda

import (
	"errors"
	"testing"
)

func TestOpen_noCgo(t *testing.T) {
	if _, err := Open(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Open(0) = %v, want ErrNoDriver", err)
	}
	if _, err := Query(0); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Query(0) = %v, want ErrNoDriver", err)
	}
}
