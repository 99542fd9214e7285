#!/bin/sh
# compare-outputs.sh BASE NEW [SNAPSHOT...]: runs two tracer binaries on the
# snapshots (default testdata/snapshots/*.pickle) and the workloads of
# testdata/workloads and record/workloads, each in a folder of its own under
# the same file names, and reports every output that differs: import's
# trace, analyze's text and JSON (with the timeline), replay's JSON under
# expandable segments, info's JSON, the segments and fragmentation plots,
# and each workload recorded on the simulated device.
# Exits 1 on a difference.
set -u
base=$1 new=$2
shift 2
[ $# -gt 0 ] || set -- testdata/snapshots/*.pickle
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/base" "$dir/new"
bad=0
same() { # same LABEL FILE
	if ! cmp -s "$dir/base/$2" "$dir/new/$2"; then
		echo "DIFFERS: $1"
		bad=1
	fi
}
n=0
for snap in "$@"; do
	name=$(basename "$snap" .pickle)
	for w in base new; do
		bin=$base
		[ "$w" = new ] && bin=$new
		(
			cd "$dir/$w" || exit 1
			"$bin" import "$OLDPWD/$snap" -o t.arrows >/dev/null 2>&1
			"$bin" analyze t.arrows --top 20 >an 2>&1
			"$bin" analyze t.arrows --json --timeline >anj 2>&1
			"$bin" replay t.arrows --conf expandable_segments:True --json >rep 2>&1
			"$bin" info t.arrows --json >info 2>&1
			"$bin" plot seg.svg t.arrows --kind segments >/dev/null 2>&1
			"$bin" plot frag.svg t.arrows --kind fragmentation >/dev/null 2>&1
		)
	done
	for f in t.arrows an anj rep info seg.svg frag.svg; do
		same "$name $f" $f
	done
	n=$((n + 1))
done
# A recording's timestamps are the wall clock's: the recordings are compared
# through analyze's JSON without its times, and the base's recording is
# analysed by both.
untimed() {
	python3 -c '
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if "time" not in k.lower() and k != "lifetimes" and k != "t0_us"}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
print(json.dumps(strip(json.load(sys.stdin)), sort_keys=True))'
}
for wl in testdata/workloads/*.workload record/workloads/*.workload; do
	name=$(basename "$wl" .workload)
	for w in base new; do
		bin=$base
		[ "$w" = new ] && bin=$new
		(
			cd "$dir/$w" || exit 1
			"$bin" record --workload "$OLDPWD/$wl" --device sim -o rec.arrows >/dev/null 2>&1
			"$bin" analyze rec.arrows --json --timeline | untimed >anr
		)
		"$bin" analyze "$dir/base/rec.arrows" --json --timeline >"$dir/$w/anb" 2>&1
	done
	same "$name record (untimed)" anr
	same "$name analyze of the recording" anb
	n=$((n + 1))
done
echo "$n inputs compared"
exit $bad
