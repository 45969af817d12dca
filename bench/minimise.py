"""Deduplication and minimisation quality over every injected fault.

For each fault of ``mpsfuzz.testing.faults`` this runs ``mpsfuzz run`` on the op that
exercises it, with only that fault switched on, into a fresh corpus, and reads back:

- distinct findings per injected fault (target: 1.0: one bug, one finding);
- elements per minimised input tensor (median over all inputs of all findings);
- minimisation time per finding (re-runs + reducer + ablation), and elements before
  (what Hypothesis handed over) and after the reducer;
- the repro script of each finding: body lines (without imports) and whether it was
  verified to reproduce in a fresh interpreter.

    python bench/minimise.py [--cases 600] [--budget 90] [--jobs 2] [--faults a,b] [--json out.json] [--keep DIR]

``atan2_int64_unsupported`` is skipped: an unsupported kernel is not a bug, so it must
give no finding.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from math import prod
from pathlib import Path

FAULT_TARGET = "mpsfuzz.testing.faults:target"
# fault -> the catalogue op that exercises it
FAULT_OPS = {
    "bitwise_noncontig": "bitwise_and", "triu_tril_gt3d": "triu", "sqrt_chalf": "sqrt",
    "add_alpha_abort": "add", "cholesky_ex_empty": "linalg.cholesky_ex", "fmax_fmin_scalar": "fmax",
    "mm_mixed_dtype_segv": "mm", "shift_scalar_tensor": "bitwise_left_shift_scalar",
    "lu_factor_noncontig": "linalg.lu_factor", "prod_hang_5d": "prod", "unary_offset": "neg",
    "lgamma_negative": "lgamma", "where_inf": "where", "var_5d": "var", "conv_channels_last": "conv2d",
    "relu_drops_channels_last": "relu", "max_pool_ceil_mode": "max_pool2d", "gelu_tanh_backward": "gelu",
    "gather_noncontig_index": "gather", "index_add_alpha_raise": "index_add",
    "nll_loss_ignore_index": "nll_loss", "sdpa_causal_lengths": "scaled_dot_product_attention",
    "add_out_noncontig": "add", "mul_inplace_noncontig": "mul", "index_select_int32_assert": "index_select",
    "uniform_noncontig_noop": "uniform_", "sdpa_gt4d": "scaled_dot_product_attention",
    "smooth_l1_empty": "smooth_l1_loss", "mse_loss_empty_abort": "mse_loss",
    "multinomial_noncontig": "multinomial", "avg_pool2d_half": "avg_pool2d", "silu_noncontig": "silu",
    "conv_backward_noncontig": "conv2d", "batch_norm_backward_3d": "batch_norm",
    "constant_pad_zero": "pad_constant", "index_copy_strided_index": "index_copy",
    "index_select_0d": "index_select", "var_0d_raise": "var", "softmax_gt4d": "softmax",
    "fft_noncontig": "fft.fft", "sum_empty_dim": "sum", "sub_out_resize": "sub",
    "sigmoid_noncontig": "sigmoid", "sigmoid_half": "sigmoid", "erfinv_stale_graph": "erfinv",
    "digamma_every_other": "digamma", "cumsum_leak": "cumsum", "sub_inplace_spill": "sub",
}


def run_fault(fault: str, op: str, cases: int, budget: float, workdir: Path) -> dict:
    corpus = workdir / fault
    env = dict(os.environ, MPSFUZZ_FAULTS=fault)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", op, "--target", FAULT_TARGET,
                           "--max-cases", str(cases), "--budget", f"{budget}s", "--seed", "1",
                           "--corpus", str(corpus), "--timeout", "3", "--no-progress"],
                          env=env, capture_output=True, text=True)
    findings = [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]
    findings = [f for f in findings if f["status"] != "cpu-bug"]
    return {"fault": fault, "op": op, "rc": proc.returncode, "wall_s": time.monotonic() - start,
            "findings": [{"oracle": f["oracle"], "status": f["status"], "signature_key": f["signature_key"],
                          "explanation": f["explanation"] or ("flaky" if f["flaky"] else ""),
                          "elements": [prod(i["shape"]) for i in f["case"]["inputs"]],
                          "shapes": [i["shape"] for i in f["case"]["inputs"]],
                          "elements_before": (f.get("minimisation") or {}).get("elements_before"),
                          "minimise_s": (f.get("minimisation") or {}).get("seconds", 0.0),
                          "repro_lines": (f.get("repro") or {}).get("lines"),
                          "repro_helper_lines": (f.get("repro") or {}).get("helper_lines") or 0,
                          "repro_verified": (f.get("repro") or {}).get("verified")} for f in findings]}


def _repro_cell(finding: dict) -> str:
    """Body lines of the finding's repro script (+ lines of helpers copied from the
    catalogue, such as a canonicaliser) and its verdict: "9 ok", "6+62 ok", "12 NOT"."""
    if finding["repro_lines"] is None:
        return "-"
    helpers = finding.get("repro_helper_lines", 0)
    lines = f"{finding['repro_lines'] - helpers}+{helpers}" if helpers else str(finding["repro_lines"])
    return f"{lines} {'ok' if finding['repro_verified'] else 'NOT'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=600)
    parser.add_argument("--budget", type=float, default=90.0, help="seconds per fault")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--faults", default=None)
    parser.add_argument("--json", default=None, help="write the raw results here")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="keep each fault's corpus in DIR/<fault> (default: a temporary folder)")
    args = parser.parse_args()
    chosen = args.faults.split(",") if args.faults else list(FAULT_OPS)
    with tempfile.TemporaryDirectory(prefix="mpsfuzz-bench-") as tmp, ThreadPoolExecutor(args.jobs) as ex:
        where = Path(args.keep) if args.keep else Path(tmp)
        results = list(ex.map(lambda f: run_fault(f, FAULT_OPS[f], args.cases, args.budget, where), chosen))
    print(f"{'fault':28} {'op':30} {'found':>5}  {'minimal inputs (shapes)':34} {'min s':>6} {'repro':>8}  "
          f"explanation")
    for r in results:
        for i, f in enumerate(r["findings"] or [None]):
            head = (f"{r['fault']:28} {r['op']:30} {len(r['findings']):5d}" if i == 0
                    else f"{'':28} {'':30} {'+':>5}")
            if f is None:
                print(f"{head}  {'-':34} {0:6.2f} {'-':>8}  NOT FOUND")
                continue
            print(f"{head}  {str(f['shapes']):34} {f['minimise_s']:6.2f} {_repro_cell(f):>8}  "
                  f"{f['oracle']}: {f['explanation'][:90]}")
    found = [r for r in results if r["findings"]]
    per_fault = [len(r["findings"]) for r in found]
    elements = [n for r in found for f in r["findings"] for n in f["elements"]]
    before = [f["elements_before"] for r in found for f in r["findings"] if f["elements_before"] is not None]
    times = [f["minimise_s"] for r in found for f in r["findings"]]
    print()
    print(f"faults: {len(results)}, found: {len(found)}, missed: {[r['fault'] for r in results if not r['findings']]}")
    if found:
        print(f"distinct findings per injected fault: mean {statistics.mean(per_fault):.2f} "
              f"(exactly one: {sum(n == 1 for n in per_fault)} of {len(found)})")
        print(f"elements per minimised input tensor: median {statistics.median(elements):g}, "
              f"max {max(elements)}; elements per case before the reducer: median "
              f"{statistics.median(before) if before else float('nan'):g}")
        q = statistics.quantiles(times, n=10, method="inclusive") if len(times) > 1 else times * 9
        print(f"minimisation time per finding: median {statistics.median(times):.2f}s, p90 {q[-1]:.2f}s, "
              f"max {max(times):.2f}s")
        lines = [f["repro_lines"] - f.get("repro_helper_lines", 0) for r in found for f in r["findings"]
                 if f["repro_lines"] is not None]
        with_helpers = sum(1 for r in found for f in r["findings"] if f.get("repro_helper_lines"))
        verified = [f for r in found for f in r["findings"] if f["repro_verified"]]
        if lines:
            print(f"repro script body lines (without imports and copied helpers): median "
                  f"{statistics.median(lines):g}, max {max(lines)}, at most 15: {sum(n <= 15 for n in lines)} "
                  f"of {len(lines)} ({with_helpers} also carry a catalogue helper); verified to reproduce: "
                  f"{len(verified)} of {sum(len(r['findings']) for r in found)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
