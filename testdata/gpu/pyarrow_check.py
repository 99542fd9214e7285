"""Reads tracer traces with pyarrow (and polars and DuckDB where installed), as trace/doc.go
shows, and checks what it reads against `tracer info --json`.

usage: python3 pyarrow_check.py TRACER TRACE...   (prints one line per trace; exits 1 on a mismatch)
"""
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.ipc as ipc

tracer, traces = sys.argv[1], sys.argv[2:]
bad = 0
for path in traces:
    info = json.loads(subprocess.run([tracer, "info", path, "--json"], capture_output=True, check=True, text=True).stdout)
    # trace/doc.go's snippet, as written there.
    batches = list(ipc.open_stream(path))
    events = pa.Table.from_batches(batches).drop_columns(["stack"])
    stack_id = pa.chunked_array([b.column("stack").indices for b in batches])
    events = events.append_column("stack_id", stack_id)
    frames = batches[-1].column("frame").dictionary.to_pylist()
    stacks = ["\n".join(frames[f] for f in ids) for ids in batches[-1].column("stack").dictionary.to_pylist()]
    stack_text = pa.table({"stack_id": pa.array(range(len(stacks)), pa.int32()), "text": stacks})
    df = events.to_pandas()
    counts = df.action.value_counts().to_dict()
    ok = len(df) == info["events"]
    with_stack = int(df.stack_id.notna().sum())
    line = f"{path}: {len(df)} rows (info {info['events']}), {len(stacks)} stacks, {len(frames)} frames, {with_stack} rows with a stack"
    try:
        import duckdb
        top = duckdb.sql("""SELECT t.text, sum(e.size_bytes) AS bytes FROM events e
                            JOIN stack_text t USING (stack_id) WHERE e.action = 'alloc'
                            GROUP BY t.text ORDER BY bytes DESC LIMIT 1""").fetchall()
        n = duckdb.sql("SELECT count(*) FROM events").fetchone()[0]
        ok = ok and n == len(df)
        line += f"; duckdb {n} rows, top site {top[0][1] if top else 0} B"
    except ImportError:
        line += "; no duckdb"
    try:
        import polars as pl
        p = pl.from_arrow(events)
        ok = ok and p.height == len(df)
        line += f"; polars {p.height} rows"
    except ImportError:
        line += "; no polars"
    print(("ok   " if ok else "FAIL ") + line + f"; actions {counts}", flush=True)
    bad += not ok
sys.exit(1 if bad else 0)
