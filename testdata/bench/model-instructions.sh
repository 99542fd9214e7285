#!/bin/sh
# model-instructions.sh TEST_BINARY TRACE EVENTS [CONF]: the model's
# instructions per event of a trace, by cachegrind: BenchmarkReplay's
# trace-reuse replays TRACE (of EVENTS events, as tracer info counts them)
# once and three times, and the difference of the two runs' instructions
# in allocator/, replay/ and internal/addrmap/ (their non-test files; the
# set-up's numbering left out), over 2 x EVENTS, is the figure; then the
# 25 heaviest functions. CONF applies over the recorded settings
# (TRACER_REPLAY_CONF, e.g. expandable_segments:True). MISSES=1 simulates
# the caches too and adds the same files' D1 and last-level data misses
# per event (cachegrind's model of this machine's caches, no prefetch).
# Run it from the repository root; make TEST_BINARY with go test -c -o X
# ./replay.
set -eu
sim=no
[ "${MISSES:-0}" = 1 ] && sim=yes
bin=$(realpath "$1") tr=$(realpath "$2") events=$3 conf=${4:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for n in 1 3; do
	(cd replay && GODEBUG=cpu.rdtscp=off TRACER_REPLAY_TRACE=$tr TRACER_REPLAY_CONF=$conf GOMAXPROCS=1 \
		valgrind --tool=cachegrind --cache-sim=$sim --cachegrind-out-file="$dir/cg.$n" \
		"$bin" -test.run '^$' -test.bench 'BenchmarkReplay/trace-reuse' -test.benchtime ${n}x -test.cpu 1 \
		>"$dir/log.$n" 2>&1)
	cg_annotate --threshold=0 --auto=no --show-percs=no "$dir/cg.$n" >"$dir/ann.$n"
done
python3 - "$dir/ann.1" "$dir/ann.3" "$events" <<'PY'
import re, sys
mm = {}
names = []
def load(path):
    d = {}
    for line in open(path):
        if line.startswith('Events shown:'):
            names[:] = line.split(':', 1)[1].split()
        m = re.match(r'\s*((?:[\d,]+\s+)+)(/\S+?):(\S.*)$', line)
        if not m:
            continue
        v = [int(x.replace(',', '')) for x in m.group(1).split()]
        f, fn = m.group(2), m.group(3)
        if fn.strip() == 'runtime.memmove':
            mm[path] = mm.get(path, 0) + v[0]
        if not re.search(r'/(allocator|replay|internal/addrmap)/[a-z0-9]+\.go$', f) or f.endswith('_test.go'):
            continue
        if 'BlockNumbers).Number' in fn:
            continue
        d[(f.split('/')[-2] + '/' + f.split('/')[-1], fn)] = v
    return d
a, b, ev = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
n = len(names)
diff = {k: [b.get(k, [0] * n)[i] - a.get(k, [0] * n)[i] for i in range(n)] for k in set(a) | set(b)}
col = {e: i for i, e in enumerate(names)}
def per(key):
    return sum(v[col[key]] for v in diff.values()) / 2 / ev
print("model instructions per event: %.1f" % per('Ir'))
if 'D1mr' in col:
    print("model D1 data misses per event: %.3f, last-level: %.3f" % (per('D1mr') + per('D1mw'), per('DLmr') + per('DLmw')))
print("runtime.memmove instructions per event (not counted above): %.1f" % ((mm.get(sys.argv[2], 0) - mm.get(sys.argv[1], 0)) / 2 / ev))
for k, v in sorted(diff.items(), key=lambda x: -x[1][0])[:25]:
    print("%7.1f  %s %s" % (v[0] / 2 / ev, k[0], k[1].replace('github.com/tracer-dev/tracer/', '')))
PY
