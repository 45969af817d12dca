"""No false positives: the fault-injecting target with no faults (the same dispatch mode,
eager CPU underneath) gives no findings over several thousand cases across the three
families. Anything reported here is an oracle or generation bug of mpsfuzz itself."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def test_clean_target_has_no_findings_over_thousands_of_cases(tmp_path):
    corpus = tmp_path / "corpus"
    env = dict(os.environ, MPSFUZZ_FAULTS="none")
    run = subprocess.run(
        [sys.executable, "-m", "mpsfuzz", "run", "--ops", "linalg,elementwise,reduction",
         "--target", "mpsfuzz.testing.faults:target", "--max-cases", "3000", "--seed", "11",
         "--corpus", str(corpus), "--timeout", "20", "--no-progress"],
        cwd=tmp_path, env=env, text=True, capture_output=True, timeout=900)
    findings = [json.loads(p.read_text())["title"] for p in corpus.glob("*.json")]
    assert findings == [], run.stdout[-3000:]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    done = next(line for line in run.stdout.splitlines() if line.startswith("done"))
    assert " 3000 cases" in done or "3001 cases" in done, done
    valid = int(done.split("valid ")[1].split("%")[0])
    assert valid >= 90, done
