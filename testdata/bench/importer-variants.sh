#!/usr/bin/env bash
# importer-variants.sh: builds tracer from the committed tree (HEAD) as it
# is, and once with each piece of the importer's machinery whose gain shows
# only on large files and many cores switched off, into .dev/variants/NAME/
# tracer, so that the GPU machine's host can time each against the full one:
#
#   testdata/bench/importer-variants.sh            # here; carry .dev
#   for v in noreadahead nohuge noregions; do      # there, from the repo root
#       ROUNDS=21 testdata/gpu/ab.sh .dev/variants/full .dev/variants/$v import
#   done
#
# noreadahead: no read-ahead goroutine (record/torchsnap/readahead.go);
# nohuge: no huge-page advice for the event store (hugepage_linux.go);
# noregions: no parallel regions, every file decoded into a spill
# (record/torchsnap/region.go, record/import.go's streamMax). A piece whose
# variant is as fast, on the real snapshots too, can go (issue 27, item 2).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out=.dev/variants
variant() { # NAME [FILE:OLD:NEW]...: builds HEAD with each OLD replaced by NEW in FILE
	local name=$1 tmp e file old new
	shift
	tmp=$(mktemp -d)
	git archive HEAD | tar -x -C "$tmp"
	for e in "$@"; do
		IFS=: read -r file old new <<<"$e"
		grep -qF -- "$old" "$tmp/$file" || { echo "$file has no '$old'" >&2; rm -rf "$tmp"; exit 1; }
		OLD=$old NEW=$new perl -0pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/' "$tmp/$file"
	done
	mkdir -p "$out/$name"
	(cd "$tmp" && go build -o "$root/$out/$name/tracer" ./cmd/tracer)
	rm -rf "$tmp"
	echo "$out/$name/tracer"
}
variant full
variant noreadahead 'record/torchsnap/readahead.go:readAheadMin    = 4 << 20:readAheadMin    = 1 << 62'
variant nohuge 'record/torchsnap/hugepage_linux.go:if n < 4*huge {:if n >= 0 {'
variant noregions 'record/torchsnap/region.go:parMinWorkers = 4:parMinWorkers = 1 << 30' \
	'record/import.go:var streamMax int64 = 64 << 20:var streamMax int64 = 1 << 62'
