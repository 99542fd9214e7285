#!/usr/bin/env bash
# Regenerates cmd/tracer/default.pgo, the CPU profile from which `go build`
# and `go install` optimize the tracer binary (profile-guided optimization:
# hot calls inlined, hot paths laid out first). It merges profiles of the
# benchmarks of the work tracer spends its time on: replaying (the allocator
# model on generated and real streams), importing snapshots (decoding,
# reconstruction, annotation, writing), reading traces and analysing them.
#
#   testdata/bench/pgo.sh                 # from the repository root
#   TRACER_IMPORT_BENCH=real.pickle testdata/bench/pgo.sh
#
# (the second adds the import of a real training snapshot, such as
# testdata/bench/real_snapshot.py makes on a GPU machine). Regenerate it
# after large changes to those paths; an outdated profile still builds, it
# only optimizes less.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench() { # package, benchmark regexp, benchtime, profile name
	go test "$1" -run '^$' -bench "$2" -benchtime "$3" -cpuprofile "$tmp/$4.prof" -o "$tmp/$4.test" >/dev/null
}
bench ./replay 'BenchmarkReplay/(training1M|generated1M)/|BenchmarkReplay/snapshot-reuse/' 3x replay
bench ./record 'BenchmarkImport/' 20x import
bench ./record/torchsnap 'BenchmarkDecode/(multistream_x49|synthetic)' 2x decode
bench ./trace 'BenchmarkReader|BenchmarkWriter' 3x trace
bench ./analysis 'BenchmarkSummarizer' 1x analysis
go tool pprof -proto "$tmp"/*.prof >"$tmp/merged.pgo"
mv "$tmp/merged.pgo" cmd/tracer/default.pgo
ls -l cmd/tracer/default.pgo
