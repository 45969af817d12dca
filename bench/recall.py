"""Recall within a budget: what one campaign finds on the fault target, and where its time goes.

Issue 37: on a 2-core machine, a 10-minute campaign of five families (linalg,
elementwise, reduction, nn, indexing) against the fault target with every fault on must
report every crash, abort and hang fault it reaches, at least as many value faults as
before issue 30, at no more than 1.3 bugs per fault. This runs that campaign once for
each tree asked (earlier revisions, checked out in temporary worktrees, then this
working tree), one after the other on the same machine, and prints for each:

- the campaign: cases, elapsed seconds, failures left pending, ops never tried;
- the faults found, by class (crash/abort, hang, leak, values and errors), attributed as
  ``bench/bugs.py`` does, against that tree's own fault table; faults both trees have are
  compared by name;
- bugs per found fault (target <= 1.3);
- the time split from the run record (trees that record one): the fuzzing's draw, run,
  check (case oracles) and jury seconds; the desk's shrink, triage (and its steps),
  verify and reverify seconds; and the desk's idle share.

and the ratios of the last tree to each earlier one.

    python bench/recall.py --before 91657b7 --before 997485a [--budget 600] [--seed 1] [--keep DIR]

(91657b7: main before issue 30; 997485a: main as issue 37 found it, with the time split
recorded and nothing else changed.)

``--corpus LABEL=DIR`` measures a corpus a campaign of this bench already wrote (no run).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bugs  # noqa: E402  (bench/bugs.py: the attribution of bugs to faults)

FAULT_TARGET = "mpsfuzz.testing.faults:target"
FAMILIES = "linalg,elementwise,reduction,nn,indexing"
CLASSES = {"abort": "crash", "segfault": "crash", "hang": "hang", "leak": "leak", "leak_output": "leak"}
DESK = ("shrink", "triage", "verify", "reverify")
FUZZING = ("draw", "run", "check", "jury")


def fault_class(fault) -> str:
    return CLASSES.get(fault.effect, "value")


def load_faults(tree: Path):
    """(FAULTS, NOT_BUGS) of ``tree``'s fault target, loaded from its file as a module of
    this tree's ``mpsfuzz.testing``, so that its relative imports (the large class's
    element limit) resolve."""
    importlib.import_module("mpsfuzz.testing")
    path = tree / "mpsfuzz" / "testing" / "faults.py"
    spec = importlib.util.spec_from_file_location(f"mpsfuzz.testing._faults_{abs(hash(str(tree)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FAULTS, getattr(module, "NOT_BUGS", frozenset())


def run_campaign(tree: Path, corpus: Path, budget: float, seed: int, families: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("MPSFUZZ_FAULTS", None)  # every fault
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", families, "--target", FAULT_TARGET,
                           "--budget", f"{budget:g}s", "--seed", str(seed), "--corpus", str(corpus),
                           "--no-progress"], cwd=tree, env=env, capture_output=True, text=True)
    summary = next((ln for ln in done.stdout.splitlines() if ln.startswith("done")), done.stderr.strip()[-300:])
    return {"rc": done.returncode, "wall_s": round(time.monotonic() - started, 1), "done": summary}


def run_record(corpus: Path) -> dict:
    records = sorted((corpus / "runs").glob("*.json")) if (corpus / "runs").is_dir() else []
    return json.loads(records[-1].read_text()) if records else {}


def measure(label: str, tree: Path, corpus: Path, campaign: dict | None) -> dict:
    faults, not_bugs = load_faults(tree)
    attributed = bugs.measure(corpus, (faults, not_bugs), tree)
    record = run_record(corpus)
    found = {name for name in attributed["per_fault"] if name not in not_bugs}
    by_class: dict[str, list[str]] = {}
    for name, fault in faults.items():
        if name not in not_bugs:
            by_class.setdefault(fault_class(fault), []).append(name)
    rows = attributed["bugs"]
    return {"label": label, "tree": str(tree), "campaign": campaign, "record": record,
            "faults": {cls: sorted(names) for cls, names in by_class.items()},
            # A not-bug fault is reported where it alone explains a bug; beside a real
            # fault that fires on the same call (a broad trigger: every float16 sum) the
            # bug is the real fault's.
            "false": sorted({name for r in rows if r["faults"] and set(r["faults"]) <= set(not_bugs)
                             for name in r["faults"]}),
            "found": sorted(found),
            "bugs": len(rows), "attributed_bugs": sum(1 for r in rows if r["faults"]),
            "findings": attributed["findings"]}


def _split(record: dict) -> dict:
    split = dict(record.get("time_split") or {})
    elapsed = record.get("elapsed_s") or 0.0
    if split and elapsed:
        busy = sum(split.get(stage, 0.0) for stage in DESK)
        split["desk idle"] = max(0.0, elapsed - busy)
    return split


def report(results: list[dict]) -> None:
    columns = [r["label"] for r in results]
    width = max(14, *(len(c) + 2 for c in columns))

    def row(name: str, values) -> None:
        print(f"{name:34}" + "".join(f"{v:>{width}}" for v in values))

    row("", columns)
    row("cases", [r["record"].get("cases", "?") for r in results])
    row("elapsed s", [r["record"].get("elapsed_s", "?") for r in results])
    row("wall s (command)", [(r["campaign"] or {}).get("wall_s", "-") for r in results])
    row("failures left pending", [r["record"].get("left_pending", "?") for r in results])
    row("ops never tried", [len(r["record"]["untried_ops"]) if "untried_ops" in r["record"] else "?"
                            for r in results])
    for cls in ("crash", "hang", "leak", "value"):
        row(f"faults found: {cls}", [f"{sum(1 for n in r['found'] if n in r['faults'].get(cls, ()))}"
                                     f"/{len(r['faults'].get(cls, ()))}" for r in results])
    row("faults found", [len(r["found"]) for r in results])
    row("not-bug faults reported (must be 0)", [len(r["false"]) for r in results])
    row("bugs (attributed to a fault)", [f"{r['bugs']} ({r['attributed_bugs']})" for r in results])
    row("bugs per found fault", [f"{r['attributed_bugs'] / len(r['found']):.2f}" if r["found"] else "-"
                                 for r in results])
    splits = [_split(r["record"]) for r in results]
    stages = [s for s in (*FUZZING, *DESK, "desk idle") if any(s in sp for sp in splits)]
    stages += sorted({s for sp in splits for s in sp if s.startswith("triage:")})
    if stages:
        print("\ntime split (seconds; the fuzzing's stages are the worker's and drawing's, the desk's its thread's)")
        for stage in stages:
            row(f"  {stage}", [f"{sp[stage]:.0f}" if stage in sp else "-" for sp in splits])
    last = results[-1]
    for earlier in results[:-1]:
        both = {cls: [n for n in names if n in last["faults"].get(cls, ())]
                for cls, names in earlier["faults"].items()}
        print(f"\n{last['label']} against {earlier['label']}, on the faults both have:")
        for cls, names in sorted(both.items()):
            mine = sum(1 for n in names if n in last["found"])
            theirs = sum(1 for n in names if n in earlier["found"])
            ratio = f"{mine / theirs:.2f}x" if theirs else "-"
            print(f"  {cls:6} {theirs:3} -> {mine:3} found ({ratio})")
        gained = sorted(set(last["found"]) - set(earlier["found"]))
        lost = sorted(n for n in set(earlier["found"]) - set(last["found"]) if n in last["faults"].get(
            next((c for c, ns in earlier["faults"].items() if n in ns), ""), ()))
        print(f"  found now, not then: {', '.join(gained) or '-'}")
        print(f"  found then, not now: {', '.join(lost) or '-'}")
        mine, theirs = splits[-1], splits[results.index(earlier)]
        common = [s for s in (*FUZZING, *DESK) if mine.get(s) and theirs.get(s)]
        if common:
            print("  time ratios: " + ", ".join(f"{s} {mine[s] / theirs[s]:.2f}x" for s in common))


def _worktree(rev: str, where: Path) -> Path:
    path = where / f"tree-{rev.replace('/', '_')}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), rev],
                   check=True, capture_output=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for each campaign")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--families", default=FAMILIES)
    parser.add_argument("--before", action="append", default=[], metavar="REV",
                        help="a revision to run before this working tree (repeatable)")
    parser.add_argument("--corpus", action="append", default=[], metavar="LABEL=DIR[@TREE]",
                        help="measure a corpus already written (by the tree TREE, default this one); no run")
    parser.add_argument("--keep", default=None, metavar="DIR", help="keep the corpora here")
    parser.add_argument("--json", default=None, help="write the raw results here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="mpsfuzz-recall-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for item in args.corpus:
            label, _, rest = item.partition("=")
            corpus, _, tree = rest.partition("@")
            results.append(measure(label, Path(tree) if tree else ROOT, Path(corpus), None))
        trees = []
        try:
            trees = [(rev, _worktree(rev, Path(tmp))) for rev in args.before] + [("this tree", ROOT)]
            for label, tree in trees if not args.corpus else []:
                corpus = work / f"corpus-{label.replace(' ', '-')}"
                campaign = run_campaign(tree, corpus, args.budget, args.seed, args.families)
                print(f"{label}: rc {campaign['rc']}, {campaign['wall_s']}s; {campaign['done']}", flush=True)
                results.append(measure(label, tree, corpus, campaign))
        finally:
            for _, tree in trees:
                if tree != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                                   capture_output=True)
        report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
