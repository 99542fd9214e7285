package trace

import "fmt"

// Version is the trace format version written in the schema metadata.
//
// NOTE: changing a column's unit or meaning needs a new Version. Adding an
// optional column does not: readers find columns by name and ignore the rest.
type Version uint16

const (
	V1      Version = 1 // first release
	V2      Version = 2 // stacks as lists of frame ids; frames stored once
	Current         = V2
)

// VersionError reports a trace written by a newer tracer than this one.
type VersionError struct {
	Path string
	Got  Version
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("trace: %s: format v%d is newer than this tracer (reads up to v%d); upgrade tracer", e.Path, e.Got, Current)
}
