package allocator

import (
	"fmt"

	"github.com/tracer-dev/tracer/internal/addrmap"
)

// SimDevice is a simulated GPU: a capacity budget, the driver's allocation
// granularity, and deterministic addresses (§19). The budget is
// Total − ContextOverhead − OtherProcesses; every Malloc and Map charges its
// size rounded up to the granularity.
//
// To replay a recording, Plan the addresses the recording's segment_alloc and
// reservation events got: the next Malloc of the planned size (or the next
// Reserve) returns that address, so every block lands where PyTorch put it.
// Unplanned calls invent addresses in a region above 2^48 by bumping a
// pointer, which never collides with recorded (canonical, < 2^47) addresses.
// A recording made on a SimDevice has addresses from 2^48 up itself: once a
// plan names one, invented addresses move to 2^52 and up, and a planned
// address that an invented segment holds is not handed out again.
type SimDevice struct {
	Total           int64
	ContextOverhead int64
	OtherProcesses  int64

	used    int64
	next    uint64
	mallocs addrmap.Map[int64] // segment sizes by address: cheaper to fill than a Go map
	resv    map[uint64]int64   // made by the first Reserve: only expandable segments reserve
	plan    []planned
}

type planned struct {
	reserve bool
	addr    uint64
	size    int64
}

// NewSimDevice returns a device of total bytes with a 2 MiB granularity and no
// overhead.
func NewSimDevice(total int64) *SimDevice {
	d := new(SimDevice)
	d.Reset(total)
	return d
}

// Reset makes d the device NewSimDevice(total) returns, keeping the memory
// of its tables: nothing is allocated or reserved, no address is planned,
// and the overheads are 0. A replayer that replays many times in a row
// resets one device (and its Allocator) rather than making new ones.
func (d *SimDevice) Reset(total int64) {
	d.Total, d.ContextOverhead, d.OtherProcesses = total, 0, 0
	d.used, d.next = 0, inventBase
	d.mallocs.Clear()
	clear(d.resv)
	d.plan = d.plan[:0]
}

// PlanMalloc makes the next Malloc of size bytes return addr.
func (d *SimDevice) PlanMalloc(addr uint64, size int64) {
	d.avoid(addr)
	d.plan = append(d.plan, planned{addr: addr, size: size})
}

// PlanReserve makes the next Reserve return addr.
func (d *SimDevice) PlanReserve(addr uint64) {
	d.avoid(addr)
	d.plan = append(d.plan, planned{reserve: true, addr: addr})
}

// inventBase is where invented addresses start; inventHigh, where they
// move once a plan names an address at or above inventBase (see SimDevice).
const (
	inventBase = 1 << 48
	inventHigh = 1 << 52
)

// avoid moves the invented addresses above a planned addr that lies in
// their region.
func (d *SimDevice) avoid(addr uint64) {
	if addr >= inventBase && d.next < inventHigh {
		d.next = inventHigh
	}
}

// ClearPlan forgets planned addresses that were not used.
func (d *SimDevice) ClearPlan() { d.plan = d.plan[:0] }

// Plans returns the number of planned addresses not used yet.
func (d *SimDevice) Plans() int { return len(d.plan) }

func (d *SimDevice) take(reserve bool, size int64) (uint64, bool) {
	for i, p := range d.plan {
		if p.reserve == reserve && (reserve || p.size == size) {
			d.plan = append(d.plan[:i], d.plan[i+1:]...)
			return p.addr, true
		}
	}
	return 0, false
}

func (d *SimDevice) invent(size int64) uint64 {
	addr := d.next
	d.next += uint64(granUp(size))
	return addr
}

func (d *SimDevice) charge(size int64) error {
	budget := d.Total - d.ContextOverhead - d.OtherProcesses
	if size > budget-d.used { // before granUp, which would overflow near MaxInt64
		return fmt.Errorf("sim: %d bytes: %w", size, ErrDeviceOOM)
	}
	s := granUp(size)
	if d.used+s > budget {
		return fmt.Errorf("sim: %d bytes: %w", size, ErrDeviceOOM)
	}
	d.used += s
	return nil
}

func (d *SimDevice) refund(size int64) { d.used -= granUp(size) }

// simGranularity is the driver's allocation granularity, 2 MiB: a power of
// two, so granUp rounds with a mask rather than two divisions on every
// segment and page mapping (1% of oom__expandable__seed1's replay).
const simGranularity = 2 << 20

// granUp rounds size ≥ 0 up to the granularity.
func granUp(size int64) int64 { return (size + simGranularity - 1) &^ (simGranularity - 1) }

// Malloc is cudaMalloc.
func (d *SimDevice) Malloc(size int64) (uint64, error) {
	if err := d.charge(size); err != nil {
		return 0, err
	}
	addr, ok := d.take(false, size)
	if ok {
		if _, held := d.mallocs.Get(addr); held {
			ok = false // invented before the plan named it: never hand out one address twice
		}
	}
	if !ok {
		addr = d.invent(size)
	}
	d.mallocs.Put(addr, size)
	return addr, nil
}

// Free is cudaFree.
func (d *SimDevice) Free(addr uint64) error {
	size, ok := d.mallocs.Take(addr)
	if !ok {
		return fmt.Errorf("sim: cudaFree(%#x): not allocated", addr)
	}
	d.refund(size)
	return nil
}

// Reserve reserves virtual address space; it costs no memory.
func (d *SimDevice) Reserve(size int64) (uint64, error) {
	addr, ok := d.take(true, 0)
	if !ok {
		addr = d.invent(size)
	}
	if d.resv == nil {
		d.resv = make(map[uint64]int64)
	}
	d.resv[addr] = size
	return addr, nil
}

// Map charges size bytes of physical memory.
func (d *SimDevice) Map(addr uint64, size int64) error { return d.charge(size) }

// Unmap refunds size bytes.
func (d *SimDevice) Unmap(addr uint64, size int64) error {
	d.refund(size)
	return nil
}

// Release returns a reservation.
func (d *SimDevice) Release(addr uint64, size int64) error {
	if _, ok := d.resv[addr]; !ok {
		return fmt.Errorf("sim: release %#x: not reserved", addr)
	}
	delete(d.resv, addr)
	return nil
}

// MemInfo reports the free and total bytes as cudaMemGetInfo would.
func (d *SimDevice) MemInfo() (free, total int64, err error) {
	return d.Total - d.ContextOverhead - d.OtherProcesses - d.used, d.Total, nil
}

// Granularity is the driver's allocation granularity.
func (d *SimDevice) Granularity() int64 { return simGranularity }

// Used returns the bytes currently charged.
func (d *SimDevice) Used() int64 { return d.used }

// Reserved reports whether addr lies in a current reservation.
func (d *SimDevice) Reserved(addr uint64) bool {
	for base, size := range d.resv {
		if addr >= base && addr < base+uint64(size) {
			return true
		}
	}
	return false
}
