#!/bin/sh
# Stands in for python in record's tests, where there is no torch: it does
# what tracer's startup hook would (status lines, a snapshot where the hook
# dumps it) without running it. FAKE_MODE: dump (default), no-torch, no-cuda,
# nothing, wait (until SIGTERM, then dump). FAKE_EXIT: exit status.
st="$TRACER_HOOK_STATUS"
echo "$$ started fake" >> "$st"
dump() {
	cp "$FAKE_SNAPSHOT" "$TRACER_HOOK_DIR/snapshot-$$.pickle"
	echo "$$ dumped $TRACER_HOOK_DIR/snapshot-$$.pickle $1" >> "$st"
}
echo "out: $*"
echo "err: PYTHONPATH=$PYTHONPATH" >&2
case "${FAKE_MODE:-dump}" in
dump)
	echo "$$ torch 2.11.0-fake" >> "$st"
	echo "$$ recording max_entries=$TRACER_HOOK_MAX_ENTRIES stacks=$TRACER_HOOK_STACKS" >> "$st"
	dump exit ;;
no-torch) echo "$$ no-torch /usr/bin/fake" >> "$st" ;;
no-cuda) echo "$$ torch 2.11.0-fake" >> "$st"; echo "$$ no-cuda" >> "$st" ;;
wait)
	echo "$$ recording" >> "$st"
	trap 'dump sigterm; exit 143' TERM
	echo ready
	while :; do sleep 0.05; done ;;
esac
exit "${FAKE_EXIT:-0}"
