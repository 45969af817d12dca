"""New means verified (issue 30, point 4): a finding whose repro script has not run to
the end in a fresh interpreter is `unverified`, listed apart and never new, and the
next run on the corpus verifies it again; one whose script ran and did not reproduce
it is `unconfirmed` (tests/test_unconfirmed.py)."""
from __future__ import annotations

import json

import pytest

from mpsfuzz.corpus.finding import Finding

from test_corpus import case, wrong_values
from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz, unverified_triu_finding


def test_the_status_follows_the_verification():
    f = Finding.create(case(), wrong_values(), target_name="faulty-cpu", target_spec=FAULT_TARGET, device="cpu")
    assert f.status == "unverified"                       # no script run yet
    f.repro = {"script": "x", "verified": None, "detail": "not verified here"}
    assert f.status == "unverified"                       # it could not run here
    f.repro = {"script": "x", "verified": False}
    assert f.status == "unconfirmed"                      # it ran and did not reproduce
    f.repro = {"script": "x", "verified": True}
    assert f.status == "new"


@pytest.mark.slow
def test_an_unverified_finding_is_verified_again_by_the_next_run(tmp_path):
    corpus = tmp_path / "corpus"
    first = unverified_triu_finding(corpus, tmp_path)
    # not new, but counted: an unverified target finding hides nothing from the exit code
    assert first.returncode == 1, first.stdout + first.stderr
    (found,) = findings_in(corpus)
    assert found["status"] == "unverified"
    said = " ".join(first.stdout.split())
    assert "new findings 0" in said and "unverified (repro not run to the end) 1" in said
    listed = mpsfuzz("corpus", "list", str(corpus), "--status", "unverified", "--format", "json", faults="none",
                     cwd=tmp_path)
    assert len(json.loads(listed.stdout)) == 1
    again = mpsfuzz("run", "--ops", "triu", "--target", FAULT_TARGET, "--max-cases", "1", "--seed", "2",
                    "--corpus", str(corpus), "--no-progress", faults="triu_tril_gt3d", cwd=tmp_path)
    assert "repro scripts of earlier unverified findings run again: 1 verified" in " ".join(again.stdout.split()), again.stdout
    (found,) = [f for f in findings_in(corpus) if f["signature"] == found["signature"]]
    assert found["status"] == "new" and found["repro"]["verified"] is True
