package allocator

import (
	"fmt"
	"sync"
)

// Stat is one of c10's Stat counters (§11).
type Stat struct {
	Current   int64
	Peak      int64 // maximum of Current, updated on every increase
	Allocated int64 // running sum of increases
	Freed     int64 // running sum of decreases
}

// inc and dec leave Allocated alone: it is always Current + Freed (both
// start at 0, and Restore starts Allocated at Current with Freed 0), so
// Stats fills it in rather than every update paying for a third counter.
func (s *Stat) inc(n int64) {
	c := s.Current + n
	s.Current = c
	if c > s.Peak {
		s.Peak = c
	}
}

func (s *Stat) dec(n int64) {
	s.Current -= n
	s.Freed += n
}

// StatArray is a Stat per StatType: all, small_pool, large_pool.
//
// The allocator updates only the pools' entries and the aggregate's peak:
// the aggregate's current and freed values are the sums of the pools'
// (every update moves the aggregate and one pool by the same amount), so
// sum fills them in where the statistics are read, and a free, which
// cannot raise a peak, updates one entry instead of two.
type StatArray [3]Stat

// statTypes selects which StatArray entries a pool moves: all and its
// class, 0 for small_pool and 1 for large_pool (entries 1 and 2).
type statTypes uint8

func (a *Allocator) statTypes(p *blockPool) statTypes {
	if p.small {
		return 0
	}
	return 1
}

// inc raises the pool's entry by n and the aggregate's peak to the sum of
// the pools' current values, if that is above it.
func (s *StatArray) inc(t statTypes, n int64) {
	i := 1 + int(t&1) // 1 or 2, with no bounds check
	c := s[i].Current + n
	s[i].Current = c
	if c > s[i].Peak {
		s[i].Peak = c
	}
	if all := c + s[3-i].Current; all > s[0].Peak {
		s[0].Peak = all
	}
}

func (s *StatArray) dec(t statTypes, n int64) {
	i := 1 + int(t&1)
	s[i].Current -= n
	s[i].Freed += n
}

// up and down are inc and dec for the arrays whose peaks are kept lazily
// (Allocation, AllocatedBytes, RequestedBytes, Active, ActiveBytes): up
// only raises the pool's current value, and down first raises the pool's
// and the aggregate's peaks to the values they had before it. A peak is
// the greatest value before some decrease or the present one, so the true
// peak is at all times the greater of Peak and Current (settle). A
// malloc raises these arrays and a free lowers them, and mallocs are the
// more numerous; an array takes up and down or inc and dec, never both.
func (s *StatArray) up(t statTypes, n int64) {
	i := 1 + int(t&1)
	s[i].Current += n
}

func (s *StatArray) down(t statTypes, n int64) {
	i := 1 + int(t&1)
	c := s[i].Current
	if c > s[i].Peak {
		s[i].Peak = c
	}
	if all := c + s[3-i].Current; all > s[0].Peak {
		s[0].Peak = all
	}
	s[i].Current = c - n
	s[i].Freed += n
}

// settle raises the peaks that up leaves behind to the current values.
func (s *StatArray) settle() {
	for i := 1; i <= 2; i++ {
		if s[i].Current > s[i].Peak {
			s[i].Peak = s[i].Current
		}
	}
	if all := s[1].Current + s[2].Current; all > s[0].Peak {
		s[0].Peak = all
	}
}

// sum sets the aggregate's current and freed values, which inc and dec
// leave to it, from the pools'.
func (s *StatArray) sum() {
	s[0].Current = s[1].Current + s[2].Current
	s[0].Freed = s[1].Freed + s[2].Freed
}

// Stats is DeviceStats: everything torch.cuda.memory_stats() reports.
type Stats struct {
	Allocation          StatArray
	Segment             StatArray
	Active              StatArray
	InactiveSplit       StatArray
	AllocatedBytes      StatArray
	ReservedBytes       StatArray
	ActiveBytes         StatArray
	InactiveSplitBytes  StatArray
	RequestedBytes      StatArray
	OversizeAllocations Stat
	OversizeSegments    Stat
	NumAllocRetries     int64
	NumOOMs             int64
	NumSyncAllStreams   int64
	NumDeviceAlloc      int64
	NumDeviceFree       int64
	// MaxSplitSize is max_split_size as configured when the allocator was built.
	MaxSplitSize int64
}

// activeStats returns the statistics with Active and ActiveBytes filled in.
//
// A block is active while it is allocated or pending (freed, awaiting
// cross-stream events), so until some block is pending Active and
// ActiveBytes move exactly as Allocation and AllocatedBytes do: the same
// increments and decrements, in the same calls, hence the same current,
// peak and freed values. Until then only Allocation and AllocatedBytes are
// updated and the others are copied from them here. The first free that
// leaves a block pending (or a Restore) separates them for good
// (activeApart). That spares every malloc and free two of its five
// statistic updates.
func (a *Allocator) activeStats() Stats {
	s := a.stats
	s.settle()
	s.sum()
	if !a.activeApart {
		s.Active, s.ActiveBytes = s.Allocation, s.AllocatedBytes
	}
	return s
}

// separateActive starts keeping Active and ActiveBytes on their own, from
// the values they have shared with Allocation and AllocatedBytes so far.
func (a *Allocator) separateActive() {
	a.stats.Active, a.stats.ActiveBytes = a.stats.Allocation, a.stats.AllocatedBytes
	a.activeApart = true
}

// Stats returns a copy of the allocator's statistics.
func (a *Allocator) Stats() Stats {
	s := a.activeStats()
	for _, arr := range s.arrays() {
		for i := range arr.s {
			arr.s[i].fill()
		}
	}
	s.OversizeAllocations.fill()
	s.OversizeSegments.fill()
	return s
}

// FreeCached returns the bytes reserved but not allocated, over all pools:
// Stats' ReservedBytes less its AllocatedBytes (the aggregate figures),
// without making the whole Stats, which a replay asks for at every OOM.
func (a *Allocator) FreeCached() int64 {
	r, al := &a.stats.ReservedBytes, &a.stats.AllocatedBytes
	return r[1].Current + r[2].Current - al[1].Current - al[2].Current
}

// settle raises the lazily kept peaks of s (StatArray.up).
func (s *Stats) settle() {
	for _, arr := range [...]*StatArray{&s.Allocation, &s.AllocatedBytes, &s.RequestedBytes, &s.Active, &s.ActiveBytes} {
		arr.settle()
	}
}

// sum fills in the aggregate entries of s's arrays (StatArray.sum).
func (s *Stats) sum() {
	for _, arr := range s.arrays() {
		arr.s.sum()
	}
}

// fill sets Allocated, which inc does not keep (see inc).
func (s *Stat) fill() { s.Allocated = s.Current + s.Freed }

// ResetPeak is reset_peak_memory_stats: every peak becomes its current value.
func (a *Allocator) ResetPeak() {
	a.stats.sum()
	for _, arr := range a.stats.arrays() {
		for i := range arr.s {
			arr.s[i].Peak = arr.s[i].Current
		}
	}
	a.stats.OversizeAllocations.Peak = a.stats.OversizeAllocations.Current
	a.stats.OversizeSegments.Peak = a.stats.OversizeSegments.Current
}

type namedArray struct {
	name string
	s    *StatArray
}

func (s *Stats) arrays() []namedArray {
	return []namedArray{
		{"allocation", &s.Allocation}, {"segment", &s.Segment}, {"active", &s.Active},
		{"inactive_split", &s.InactiveSplit}, {"allocated_bytes", &s.AllocatedBytes},
		{"reserved_bytes", &s.ReservedBytes}, {"active_bytes", &s.ActiveBytes},
		{"inactive_split_bytes", &s.InactiveSplitBytes}, {"requested_bytes", &s.RequestedBytes},
	}
}

var statTypeNames = [3]string{"all", "small_pool", "large_pool"}

// statNames are the memory_stats() keys of every Stat, in the order Map
// visits them: each array's three types, then the two oversize stats.
// Built at the first Map, not at package init: most commands never call it.
var statNames = sync.OnceValue(func() [][4]string {
	var out [][4]string
	add := func(prefix string) {
		out = append(out, [4]string{prefix + ".current", prefix + ".peak", prefix + ".allocated", prefix + ".freed"})
	}
	for _, a := range (&Stats{}).arrays() {
		for _, n := range statTypeNames {
			add(fmt.Sprintf("%s.%s", a.name, n))
		}
	}
	add("oversize_allocations")
	add("oversize_segments")
	return out
})

// Map flattens s as torch.cuda.memory_stats() does: "allocated_bytes.all.peak",
// "oversize_allocations.current", "num_alloc_retries", "max_split_size" (-1
// when unlimited), and so on.
func (s Stats) Map() map[string]int64 {
	m := make(map[string]int64, 128)
	put := func(names *[4]string, st Stat) {
		m[names[0]] = st.Current
		m[names[1]] = st.Peak
		m[names[2]] = st.Allocated
		m[names[3]] = st.Freed
	}
	names := statNames()
	for j, a := range s.arrays() {
		for i := range statTypeNames {
			put(&names[j*3+i], a.s[i])
		}
	}
	put(&names[len(names)-2], s.OversizeAllocations)
	put(&names[len(names)-1], s.OversizeSegments)
	m["num_alloc_retries"] = s.NumAllocRetries
	m["num_ooms"] = s.NumOOMs
	m["num_sync_all_streams"] = s.NumSyncAllStreams
	m["num_device_alloc"] = s.NumDeviceAlloc
	m["num_device_free"] = s.NumDeviceFree
	m["max_split_size"] = s.MaxSplitSize
	if s.MaxSplitSize == Unlimited {
		m["max_split_size"] = -1
	}
	return m
}
