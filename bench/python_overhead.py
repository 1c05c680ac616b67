#!/usr/bin/env python3
"""Per-call overhead of qemb.Runtime.lookup against the C++ call it wraps.

For D = 4096 and D = 128 and batches of 1, 32 and 2048 ids, times in the
same process and alternating rounds:
  C++      EmbeddingRuntime::lookup in a C++ loop on the same buffers
           (Runtime._time_cpp_lookup: no Python between calls)
  out=     rt.lookup(ids, out=out) from a Python loop (no allocation)
  alloc    rt.lookup(ids), a fresh output array per call
and reports the best (minimum) time per call over the rounds (robust when
other work shares the machine), the ratio to C++ and the overhead in
microseconds. Targets: ratio <= 1.1 at batch >= 32; overhead < 2 us at batch 1.

  PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--seconds S]
"""
import argparse
import os
import tempfile
import time

import numpy as np

import qemb


def per_call(fn, calls):
    start = time.perf_counter()
    fn(calls)
    return (time.perf_counter() - start) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=0.1, help="time per measurement (default 0.1)")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds; the best of them is reported")
    ap.add_argument("--vocab", type=int, default=8192)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'D':>5} {'batch':>6} {'C++ us':>10} {'out= us':>10} {'ratio':>6} {'+us':>6} "
          f"{'alloc us':>10} {'ratio':>6} {'+us':>6}  kernel")
    with tempfile.TemporaryDirectory(prefix="qemb-bench-") as tmp:
        for dim in (4096, 128):
            table = rng.standard_normal((args.vocab, dim), dtype=np.float32)
            path = os.path.join(tmp, f"d{dim}.qemb")
            qemb.compile(table, qnn_sdk_version="2.48", out=path)
            del table
            rt = qemb.Runtime(path)
            for batch in (1, 32, 2048):
                ids = rng.integers(0, args.vocab, size=batch, dtype=np.int64)
                out = np.empty((batch, dim), dtype=np.uint16)
                # Calls per measurement from a calibration run of the C++ loop.
                calls = max(10, int(args.seconds / max(rt._time_cpp_lookup(ids, out, 200) / 200, 1e-9)))

                def py_out(n):
                    lookup = rt.lookup
                    for _ in range(n):
                        lookup(ids, out)

                def py_alloc(n):
                    lookup = rt.lookup
                    for _ in range(n):
                        lookup(ids)

                t = {"cpp": [], "out": [], "alloc": []}
                for _ in range(args.rounds):
                    t["cpp"].append(rt._time_cpp_lookup(ids, out, calls) / calls)
                    t["out"].append(per_call(py_out, calls))
                    t["alloc"].append(per_call(py_alloc, calls))
                m = {k: min(v) * 1e6 for k, v in t.items()}
                print(f"{dim:>5} {batch:>6} {m['cpp']:>10.3f} {m['out']:>10.3f} {m['out'] / m['cpp']:>6.2f} "
                      f"{m['out'] - m['cpp']:>6.2f} {m['alloc']:>10.3f} {m['alloc'] / m['cpp']:>6.2f} "
                      f"{m['alloc'] - m['cpp']:>6.2f}  {rt.kernel}")


if __name__ == "__main__":
    main()
