//go:build !cgo

package cuda

import (
	"fmt"
	"time"

	"github.com/tracer-dev/tracer/allocator"
)

// errNoCgo is what every entry point returns in a binary built without cgo.
var errNoCgo = fmt.Errorf("cuda: %w (built with CGO_ENABLED=0; rebuild with CGO_ENABLED=1 to use a GPU)", ErrNoDriver)

// Device is a GPU through the CUDA driver; built without cgo, Open always fails.
type Device struct{}

var _ allocator.Device = (*Device)(nil)

// Open fails: this binary was built without cgo. The error wraps ErrNoDriver.
func Open(ordinal int) (*Device, error) { return nil, errNoCgo }

func (d *Device) Close() error                       { return errNoCgo }
func (d *Device) Ordinal() int                       { return -1 }
func (d *Device) Name() string                       { return "" }
func (d *Device) TotalBytes() int64                  { return 0 }
func (d *Device) DriverVersion() int                 { return 0 }
func (d *Device) Granularity() int64                 { return 2 << 20 }
func (d *Device) SetTiming(on bool)                  {}
func (d *Device) Timings() Timings                   { return Timings{} }
func (d *Device) Malloc(size int64) (uint64, error)  { return 0, errNoCgo }
func (d *Device) Free(addr uint64) error             { return errNoCgo }
func (d *Device) Reserve(size int64) (uint64, error) { return 0, errNoCgo }
func (d *Device) ReservePaged(size, pageSize int64) (uint64, error) {
	return 0, errNoCgo
}
func (d *Device) Release(addr uint64, size int64) error   { return errNoCgo }
func (d *Device) Map(addr uint64, size int64) error       { return errNoCgo }
func (d *Device) Unmap(addr uint64, size int64) error     { return errNoCgo }
func (d *Device) Mapped() int64                           { return 0 }
func (d *Device) MemInfo() (free, total int64, err error) { return 0, 0, errNoCgo }
func (d *Device) Synchronize() error                      { return errNoCgo }

// Query fails: this binary was built without cgo (NVML needs it).
func Query(index int) (*Info, error) { return nil, errNoCgo }

// StartMemorySampler fails: this binary was built without cgo.
func StartMemorySampler(index int, every time.Duration) (*MemorySampler, error) {
	return nil, errNoCgo
}
