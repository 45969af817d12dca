"""One bug, one report: bugs per injected fault over one campaign of every family.

Runs ONE ``mpsfuzz run --ops all`` against the fault target with every fault on
(``MPSFUZZ_FAULTS`` unset), groups the corpus into bugs (corpus/bugs.py, as
``mpsfuzz corpus list --by bug`` does) and attributes each bug to the injected faults:

- a localised bug: the faults whose trigger fires on the aten call it is localised to
  (the call is rebuilt from the recorded storages, strides and arguments, and each
  fault's ``triggered`` asked), over all of its findings;
- a bug that is not localised (composite, flaky, crash outside aten...): the faults that
  fire while its minimal case runs on the fault target (in a subprocess: a crash fault
  must not take the bench down).

It prints, per fault that was found, its bugs (kernels, ops, findings); then the
figure that matters, **bugs per found fault** (target: at most 1.3), with findings per
found fault beside it, and the bugs that no fault explains (unattributed) apart.

    python bench/bugs.py [--budget 300] [--seed 1] [--slice 8] [--keep DIR] [--corpus DIR] [--json out.json]

``--corpus DIR`` skips the campaign and measures an existing corpus.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

FAULT_TARGET = "mpsfuzz.testing.faults:target"
ROOT = Path(__file__).resolve().parent.parent


def run_campaign(corpus: Path, budget: float, seed: int, slice_examples: int) -> dict:
    env = dict(os.environ)
    env.pop("MPSFUZZ_FAULTS", None)  # every fault
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", "all", "--target", FAULT_TARGET,
                           "--budget", f"{budget:g}s", "--seed", str(seed), "--corpus", str(corpus),
                           "--timeout", "3", "--slice", str(slice_examples), "--no-progress", "--no-verify-repros"],
                          env=env, capture_output=True, text=True)
    done = next((ln for ln in proc.stdout.splitlines() if ln.startswith("done")), proc.stderr.strip()[-300:])
    return {"rc": proc.returncode, "wall_s": round(time.monotonic() - start, 1), "done": done}


# -- attribution -----------------------------------------------------------------------------

def _value(d: dict):
    import math
    v = d.get("value")
    if isinstance(v, dict):
        if "float" in v:
            return float(v["float"])
        if "complex" in v:
            re, im = v["complex"]
            return complex(_value({"value": re}), _value({"value": im}))
    return v if not isinstance(v, float) or not math.isnan(v) else float("nan")


def rebuild_call(call: dict):
    """(OpOverload, args, kwargs) of a recorded aten call, on CPU."""
    import torch
    from mpsfuzz.generation import dtypes as dt
    storages = {}
    for s in call["storages"]:
        if s["values"] is None:
            raise ValueError("a storage too large to have been recorded")
        values = [_value({"value": v}) for v in s["values"]]
        storages[s["index"]] = torch.tensor(values, dtype=dt.to_torch(s["dtype"]))

    def build(d):
        kind = d["kind"]
        if kind == "tensor":
            t = storages[d["storage"]].as_strided(tuple(d["shape"]), tuple(d["stride"]), d["offset"])
            return t.conj() if d.get("conj") else t
        if kind in ("list", "tuple"):
            items = [build(x) for x in d["items"]]
            return items if kind == "list" else tuple(items)
        if kind == "dtype":
            return dt.to_torch(d["name"])
        if kind == "device":
            return torch.device("cpu")
        if kind in ("layout", "memory_format"):
            return getattr(torch, d["name"])
        if kind == "value":
            return _value(d)
        raise ValueError(f"cannot rebuild {d}")
    namespace, _, rest = call["kernel"].partition("::")
    name, _, overload = rest.rpartition(".")
    func = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    return func, [build(a) for a in call["args"]], {k: build(v) for k, v in call["kwargs"].items()}


_EFFECT_CLASSES = {"raise": "raises", "poison": "raises", "abort": "crash", "segfault": "crash", "hang": "hang"}


def fault_table():
    """The fault target's table of this tree (FAULTS, NOT_BUGS)."""
    from mpsfuzz.testing import faults
    return faults.FAULTS, getattr(faults, "NOT_BUGS", frozenset())


def faults_on_call(loc: dict, FAULTS) -> set[str]:
    if not isinstance(loc.get("call"), dict) or loc["call"].get("args") is None:
        return set()
    try:
        func, args, kwargs = rebuild_call(loc["call"])
    except Exception:
        return set()
    from mpsfuzz.triage.localise import divergence_class
    wanted = divergence_class(loc.get("divergence", ""))
    return {name for name, fault in FAULTS.items()
            if fault.triggered(func, tuple(args), dict(kwargs))
            and _EFFECT_CLASSES.get(fault.effect, "wrong") == wanted}


_FIRED = """
import json, sys, warnings
warnings.simplefilter("ignore")
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.generation.recipes import Case
from mpsfuzz.testing.faults import FaultTarget
target = FaultTarget()
try:
    judge_case(Case.from_json(json.loads(sys.argv[1])), target, ("values", "variants", "errors", "grads", "metadata"))
except Exception:
    pass
print(json.dumps(sorted(target.fired)))
"""


def faults_fired_by(case_json: dict, tree: Path = ROOT) -> set[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p))
    env.pop("MPSFUZZ_FAULTS", None)
    try:
        done = subprocess.run([sys.executable, "-c", _FIRED, json.dumps(case_json)], env=env, capture_output=True,
                              text=True, timeout=60)
        return set(json.loads(done.stdout.strip().splitlines()[-1])) if done.returncode == 0 else set()
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return set()


def _ops_of(fault) -> set[str]:
    """The public op names a fault's aten ops read as (``aten::mul_.Tensor``: mul)."""
    return {str(op).split("::")[-1].split(".")[0].rstrip("_") for op in fault.ops}


def measure(corpus: Path, faults=None, tree: Path = ROOT) -> dict:
    """Bugs of ``corpus`` attributed to the faults of ``faults`` (FAULTS, NOT_BUGS: this
    tree's by default); ``tree``: the source tree whose mpsfuzz ran the campaign (a
    subprocess runs its minimal cases there)."""
    from mpsfuzz.corpus.bugs import group
    from mpsfuzz.corpus.store import load_findings
    FAULTS, _ = faults if faults is not None else fault_table()
    found, problems = load_findings([corpus])
    found = [(p, f) for p, f in found if f.blame != "cpu"]
    bugs = group(found)
    rows = []
    for b in bugs:
        faults: set[str] = set()
        for _, f in b.findings:
            loc = f.localisation if isinstance(f.localisation, dict) else {}
            if loc.get("status") == "kernel":
                faults |= faults_on_call(loc, FAULTS)
            elif f.oracle == "leak":
                faults |= {n for n, fault in FAULTS.items() if fault.effect.startswith("leak")
                           and f.op.rstrip("_") in _ops_of(fault)}
            elif f.oracle not in ("crash", "hang"):
                faults |= faults_fired_by(f.case.to_json(), tree)
        if not faults and any(f.flaky for _, f in b.findings):
            # A fault that depends on earlier calls does not fire on the minimal case
            # alone: a flaky bug of its op is the stateful fault's.
            ops = {f.op.rstrip("_") for _, f in b.findings}
            faults = {n for n, fault in FAULTS.items() if _ops_of(fault) & ops and fault.effect not in
                      ("abort", "segfault", "hang", "leak")}
        rows.append({"id": b.id, "kernel": b.kernel, "kernels": b.kernels, "reason": b.reason, "status": b.status,
                     "ops": b.ops, "oracles": b.oracles, "findings": len(b.findings), "faults": sorted(faults),
                     "explanation": b.explanation})
    per_fault: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        for name in r["faults"]:
            per_fault[name].append(r)
    return {"bugs": rows, "per_fault": dict(per_fault), "findings": len(found),
            "unreadable": [str(p) for p, _ in problems]}


def report(result: dict) -> None:
    FAULTS, _ = fault_table()
    rows, per_fault = result["bugs"], result["per_fault"]
    print(f"{'fault':28} {'bugs':>4}  kernels / reasons; ops (variants); findings")
    for name in FAULTS:
        bugs = per_fault.get(name, [])
        if not bugs:
            continue
        for i, b in enumerate(bugs):
            head = f"{name:28} {len(bugs):4d}" if i == 0 else f"{'':28} {'+':>4}"
            what = ", ".join(b["kernels"]) if b["kernel"] else f"- ({b['reason'][:60]})"
            ops = "; ".join(f"{op} ({', '.join(v)})" for op, v in b["ops"].items())
            print(f"{head}  {what}; {ops}; {b['findings']} finding(s)")
    missed = [n for n in FAULTS if n not in per_fault]
    attributed = [r for r in rows if r["faults"]]
    unattributed = [r for r in rows if not r["faults"]]
    shared = [r for r in attributed if len(r["faults"]) > 1]
    found = len(per_fault)
    print()
    print(f"faults: {len(FAULTS)}, found: {found}, not found: {', '.join(missed) or '-'}")
    print(f"findings: {result['findings']}, bugs: {len(rows)} ({len(attributed)} attributed to a fault, "
          f"{len(unattributed)} unattributed; {sum(1 for r in rows if r['kernel'])} localised to a kernel)")
    if found:
        print(f"bugs per found fault: {len(attributed) / found:.2f} (target <= 1.3); all bugs per found fault: "
              f"{len(rows) / found:.2f}; findings per found fault: {result['findings'] / found:.2f}")
    if shared:
        print(f"bugs attributed to more than one fault: {len(shared)}: "
              + "; ".join(f"{r['kernel']} -> {', '.join(r['faults'])}" for r in shared))
    for r in unattributed:
        what = ", ".join(r["kernels"]) if r["kernel"] else f"- ({r['reason'][:80]})"
        print(f"  unattributed: {what}; {'; '.join(r['ops'])}; {', '.join(r['oracles'])}: {r['explanation'][:100]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the one campaign")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slice", type=int, default=8, dest="slice_examples",
                        help="cases per op per turn (small: every op is reached within a short budget)")
    parser.add_argument("--keep", default=None, metavar="DIR", help="write the corpus here (default: a temp folder)")
    parser.add_argument("--corpus", default=None, metavar="DIR", help="measure this corpus; run no campaign")
    parser.add_argument("--json", default=None, help="write the raw results here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="mpsfuzz-bugs-") as tmp:
        if args.corpus:
            corpus, campaign = Path(args.corpus), None
        else:
            corpus = Path(args.keep) if args.keep else Path(tmp) / "corpus"
            campaign = run_campaign(corpus, args.budget, args.seed, args.slice_examples)
            print(f"campaign: rc {campaign['rc']}, {campaign['wall_s']}s; {campaign['done']}")
        result = measure(corpus)
    result["campaign"] = campaign
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
