#!/usr/bin/env bash
# view_firstpaint.sh BIN TRACE: the wall time from starting `BIN view TRACE`
# to the page's first data (the URL printed, then /, /api/info and the whole
# timeline fetched), with the server's CPU time and resident memory then.
# The 2M-event trace of PERFORMANCE.md: tracer record --workload
# testdata/bench/view_train2m.workload --device sim -o t.arrows
set -euo pipefail
bin=$1; trace=$2
out=$(mktemp)
start=$(date +%s.%N)
"$bin" view "$trace" --http 127.0.0.1:0 >"$out" &
pid=$!
until [ -s "$out" ]; do sleep 0.01; done
url=$(awk '{print $3}' "$out")
n=$(curl -s "${url}api/info" | python3 -c 'import json,sys; print(json.load(sys.stdin)["traces"][0]["events"])')
curl -s "$url" >/dev/null
curl -s "${url}api/timeline?trace=0&x0=0&x1=$n&cols=1600" >/dev/null
end=$(date +%s.%N)
rss=$(ps -o rss= -p $pid)
cpu=$(awk '{printf "%.2f", ($14+$15)/100}' /proc/$pid/stat)
kill -INT $pid; wait $pid || true
rm -f "$out"
echo "first paint data $(echo "$end - $start" | bc) s wall, ${cpu} s CPU (user+sys) of the server, events $n, server RSS $((rss/1024)) MiB"
