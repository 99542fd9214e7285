#!/bin/sh
# model-instructions.sh TEST_BINARY TRACE EVENTS [CONF]: the model's
# instructions per event of a trace, by cachegrind: BenchmarkReplay's
# trace-reuse replays TRACE (of EVENTS events, as tracer info counts them)
# once and three times, and the difference of the two runs' instructions
# in allocator/, replay/ and internal/addrmap/ (their non-test files; the
# set-up's numbering left out), over 2 x EVENTS, is the figure; then the
# 25 heaviest functions. CONF applies over the recorded settings
# (TRACER_REPLAY_CONF, e.g. expandable_segments:True). Run it from the
# repository root; make TEST_BINARY with go test -c -o X ./replay.
set -eu
bin=$(realpath "$1") tr=$(realpath "$2") events=$3 conf=${4:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for n in 1 3; do
	(cd replay && TRACER_REPLAY_TRACE=$tr TRACER_REPLAY_CONF=$conf GOMAXPROCS=1 \
		valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$dir/cg.$n" \
		"$bin" -test.run '^$' -test.bench 'BenchmarkReplay/trace-reuse' -test.benchtime ${n}x -test.cpu 1 \
		>"$dir/log.$n" 2>&1)
	cg_annotate --threshold=0 --auto=no "$dir/cg.$n" >"$dir/ann.$n"
done
python3 - "$dir/ann.1" "$dir/ann.3" "$events" <<'PY'
import re, sys
mm = {}
def load(path):
    d = {}
    for line in open(path):
        m = re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+):(.*)$', line)
        if not m:
            continue
        f, fn = m.group(2), m.group(3)
        if fn.strip() == 'runtime.memmove':
            mm[path] = mm.get(path, 0) + int(m.group(1).replace(',', ''))
        if not re.search(r'/(allocator|replay|internal/addrmap)/[a-z0-9]+\.go$', f) or f.endswith('_test.go'):
            continue
        if 'BlockNumbers).Number' in fn:
            continue
        d[(f.split('/')[-2] + '/' + f.split('/')[-1], fn)] = int(m.group(1).replace(',', ''))
    return d
a, b, ev = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
diff = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
print("model instructions per event: %.1f" % (sum(diff.values()) / 2 / ev))
print("runtime.memmove instructions per event (not counted above): %.1f" % ((mm.get(sys.argv[2], 0) - mm.get(sys.argv[1], 0)) / 2 / ev))
for k, v in sorted(diff.items(), key=lambda x: -x[1])[:25]:
    print("%7.1f  %s %s" % (v / 2 / ev, k[0], k[1].replace('github.com/tracer-dev/tracer/', '')))
PY
