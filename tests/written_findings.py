"""Findings written straight into a corpus, without a campaign, for the tests of what
reads a corpus (replay, reports, issue drafts, the pytest plugin).

Each finding is a case that shows a fault of the fault-injecting target, judged in this
process by the oracles a campaign's worker runs (the failure, its message and error
profile are the real ones), and filed with ``Finding.create`` and ``Corpus.record`` as a
campaign files it. What triage would add is given instead: the explanation, and a repro
script generated for the finding and recorded as verified without being run. A campaign
costs tens of seconds of the default run (issue 39); these cost a fraction of one. The
corpora that campaigns write are read by the fault campaigns and by the slow tests."""
from __future__ import annotations

from pathlib import Path

from mpsfuzz.corpus.finding import FIXED, Finding
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports.repro_writer import repro_record
from mpsfuzz.testing.faults import FaultTarget, faults_from_env

FAULT_TARGET = "mpsfuzz.testing.faults:target"

# Minimal cases of faults of the fault target as its campaigns minimise them, with the
# conditions and explanation their triage gives.
TRIU_4D = Case("triu", (TensorRecipe((1, 1, 1, 1), "float32", values=ValueRecipe("small_int")),))
TRIU_4D_EXPLAINED = ("wrong values only when inputs have 4 or more dims; all float dtypes; every dtype class "
                     "tried fails (float, complex, integral, bool)", ("rank>=4",))
NEG_OFFSET = Case("neg", (TensorRecipe((), "float32", Layout(offset=1), ValueRecipe("small_int")),))
NEG_OFFSET_EXPLAINED = ("wrong values only when `input` has a storage offset; contiguous inputs pass; all float "
                        "dtypes; every dtype class tried fails (float, complex, integral)", ("layout:0",))
BITWISE_AND_GAPPED = Case("bitwise_and", (TensorRecipe((2,), "int64", Layout(gaps=(2,)), ValueRecipe("small_int")),
                                          TensorRecipe((), "int64", values=ValueRecipe("small_int"))))
BITWISE_AND_GAPPED_EXPLAINED = ("wrong values only when `input` is non-contiguous (gapped); contiguous inputs "
                                "pass; all integral dtypes; every dtype class tried fails (integral, bool)",
                                ("layout:0",))
SQRT_CHALF = Case("sqrt", (TensorRecipe((), "complex32", values=ValueRecipe("small_int")),))
SQRT_CHALF_EXPLAINED = ("wrong values whatever the layout, size and values tried; only complex32 (complex64, "
                        "complex128 pass); float, integral, bool dtypes pass", ("classes:complex", "dtypes:complex32"))


def judged_failure(case: Case, faults: str) -> Failure:
    """The one failure the fault target with ``faults`` on (MPSFUZZ_FAULTS's syntax)
    shows on ``case``, judged here as a worker judges it."""
    outcome = judge_case(case, FaultTarget(faults_from_env(faults)), worker_oracles(DEFAULT))
    failures = [Failure.from_json(f) for f in outcome.failures]
    assert outcome.valid and len(failures) == 1, outcome
    return failures[0]


def written_finding(corpus: Path, case: Case, faults: str, explained: tuple[str, tuple[str, ...]], *,
                    known: dict | None = None, fixed: bool = False) -> Path:
    """Write the finding of ``case`` (its fault in ``faults``) into ``corpus``: explained by
    ``explained`` (its explanation and conditions), with a script recorded as a verified
    repro, matching the upstream entry ``known`` ({id, status, reason, link}) if given,
    and replayed once as fixed if ``fixed``. Returns its file."""
    text, conditions = explained
    finding = Finding.create(case, judged_failure(case, faults), target_name="faulty-cpu", target_spec=FAULT_TARGET,
                             device="cpu", known=known, conditions=conditions, explanation={"text": text})
    finding.repro = repro_record(finding, verify=False, timeout_s=60.0)
    assert finding.repro["script"], finding.repro
    finding.repro.update(verified=True, detail="recorded as verified by the test that wrote it (not run)")
    if fixed:
        finding.record_replay(FIXED, target=FAULT_TARGET, device="cpu")
    path, new = Corpus(corpus).record(finding)
    assert new, path
    return path
