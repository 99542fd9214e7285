#!/bin/sh
# compare-outputs.sh BASE NEW [SNAPSHOT...]: runs two tracer binaries on
# snapshots and reports every output that differs. Exits 1 on a difference.
#
# The snapshots default to every one in the repository: testdata/snapshots,
# the pairs of testdata/pairs/snapshots (gunzipped first) and the decoder's
# own (record/torchsnap/testdata, pickles and JSON, some of them malformed on
# purpose). Each is compared by import's trace, messages and exit status,
# info's text and JSON, analyze's text and JSON (with the timeline), replay's
# text under the recorded settings and its JSON under expandable segments and
# a 4 KiB rounding quantum, and the segments and fragmentation plots. The
# workloads of testdata/workloads and record/workloads are then recorded on
# the simulated device by each binary and compared through analyze.
set -u
base=$1 new=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/base" "$dir/new" "$dir/in"
if [ $# -eq 0 ]; then
	set -- testdata/snapshots/*.pickle testdata/pairs/snapshots/*.pickle.gz
	for d in record/torchsnap/testdata; do
		if [ -d "$d" ]; then
			set -- "$@" "$d"/*.pickle "$d"/*.json
			break
		fi
	done
fi
bad=0
same() { # same LABEL FILE
	if ! cmp -s "$dir/base/$2" "$dir/new/$2"; then
		echo "DIFFERS: $1"
		bad=1
	fi
}
n=0
for snap in "$@"; do
	name=$(basename "$snap")
	# The input's path shows in error messages: both binaries read the
	# same copy, under a name of its own.
	in="$dir/in/$n-${name%.gz}"
	case $snap in
	*.gz) gzip -dc "$snap" >"$in" ;;
	*) cp "$snap" "$in" ;;
	esac
	for w in base new; do
		bin=$base
		[ "$w" = new ] && bin=$new
		(
			cd "$dir/$w" || exit 1
			rm -f t.arrows
			"$bin" import "$in" -o t.arrows >imp 2>&1
			echo "exit $?" >>imp
			[ -f t.arrows ] || exit 0
			"$bin" info t.arrows >inf 2>&1
			"$bin" info t.arrows --json >info 2>&1
			"$bin" analyze t.arrows --top 20 >an 2>&1
			"$bin" analyze t.arrows --json --timeline >anj 2>&1
			"$bin" replay t.arrows >rept 2>&1
			"$bin" replay t.arrows --conf expandable_segments:True --json >rep 2>&1
			"$bin" replay t.arrows --round 4096 --json >rep4k 2>&1
			"$bin" plot seg.svg t.arrows --kind segments >/dev/null 2>&1
			"$bin" plot frag.svg t.arrows --kind fragmentation >/dev/null 2>&1
		)
	done
	same "$name import" imp
	if [ -f "$dir/base/t.arrows" ] || [ -f "$dir/new/t.arrows" ]; then
		for f in t.arrows inf info an anj rept rep rep4k seg.svg frag.svg; do
			same "$name $f" $f
		done
	fi
	rm -f "$dir"/base/* "$dir"/new/* "$in"
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
