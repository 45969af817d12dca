"""No false positives: the fault-injecting target with no faults (the same dispatch mode,
eager CPU underneath) gives no new findings, with every oracle and variant on. Anything
new reported here is an oracle or generation bug of mpsfuzz itself; real torch bugs
that show up on CPU too are listed in the known-failure table and come out marked known.

The default run fuzzes each family on its own, every op of it, in well under a minute
(a family's run is also capped by --budget); the whole catalogue with more cases per op
is a soak campaign (`pytest -m soak`)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from mpsfuzz.generation import catalogue

FAMILIES = catalogue.families()


def _clean_run(tmp_path, ops: str, *, per_op: int, n_ops: int, seed: int, budget_s: int | None = None):
    corpus = tmp_path / "corpus"
    args = [sys.executable, "-m", "mpsfuzz", "run", "--ops", ops, "--target", "mpsfuzz.testing.faults:target",
            "--slice", str(per_op), "--max-cases", str(per_op * n_ops), "--seed", str(seed),
            "--corpus", str(corpus), "--timeout", "20", "--no-progress"]
    if budget_s is not None:
        args += ["--budget", f"{budget_s}s"]
    run = subprocess.run(args, cwd=tmp_path, env=dict(os.environ, MPSFUZZ_FAULTS="none"), text=True,
                         capture_output=True, timeout=(budget_s or 3600) + 120)
    found = [json.loads(p.read_text()) for p in corpus.glob("*.json")]
    new = [(f["title"], f["message"][:300]) for f in found if f["status"] == "new"]
    assert new == [], run.stdout[-3000:]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    done = next(line for line in run.stdout.splitlines() if line.startswith("done"))
    cases = int(re.search(r"(\d+) cases", done).group(1))
    valid = int(re.search(r"valid (\d+)%", done).group(1))
    return cases, valid, done


# One family by default; every family's campaign runs with -m slow.
@pytest.mark.parametrize("family", [f if f == "elementwise" else pytest.param(f, marks=pytest.mark.slow)
                                    for f in sorted(FAMILIES)])
def test_clean_target_has_no_new_findings_in_each_family(family, tmp_path):
    n_ops = len(FAMILIES[family])
    cases, valid, done = _clean_run(tmp_path, family, per_op=12, n_ops=n_ops, seed=12, budget_s=50)
    # Twelve cases per op reach every op unless the budget stopped the run first.
    assert cases >= n_ops, done
    assert valid >= 90, done


@pytest.mark.soak
def test_clean_target_has_no_new_findings_over_the_whole_catalogue(tmp_path):
    n_ops = sum(len(names) for names in FAMILIES.values())
    cases, valid, done = _clean_run(tmp_path, "all", per_op=40, n_ops=n_ops, seed=12)
    assert cases == 40 * n_ops, done
    assert valid >= 90, done
