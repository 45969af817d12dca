"""The crash oracle reads faulthandler's dump of a real crash: its cleaned top frames key
the finding, and a crash with the CPU reference on the stack is eager CPU's bug (the
target ran the case first, and survived it), not the target's."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mpsfuzz.execution.observation import ProcessEvent
from mpsfuzz.oracles.process import check_crash, clean_frames, crashed_in_reference


def _dump_of_crash_in(function: str) -> tuple[int, str]:
    """A Python process that segfaults inside ``function`` (as a worker does, with
    faulthandler on): its return code and stderr."""
    script = textwrap.dedent(f"""
        import ctypes, faulthandler
        faulthandler.enable()
        def {function}(case):
            return ctypes.string_at(0)
        def judge(case):
            return {function}(case)
        judge(None)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr


def test_a_crash_in_the_cpu_reference_blames_eager_cpu():
    returncode, stderr = _dump_of_crash_in("run_reference")
    assert returncode < 0 and "run_reference" in stderr
    assert crashed_in_reference(stderr)
    failure = check_crash(ProcessEvent(op="conv2d", target_name="mps", kind="died", returncode=returncode,
                                       stderr_tail=stderr))
    assert failure.blame == "cpu"
    assert "eager CPU (the reference)" in failure.title and "mps" not in failure.title


def test_a_crash_on_the_target_blames_the_target():
    returncode, stderr = _dump_of_crash_in("_run_dut")
    assert not crashed_in_reference(stderr)
    failure = check_crash(ProcessEvent(op="conv2d", target_name="mps", kind="died", returncode=returncode,
                                       stderr_tail=stderr))
    assert failure.blame == "target" and "on mps (SIG" in failure.title
    # keyed on the signal and the innermost frames, cleaned
    assert failure.dedup_key[:2] == ("crash", "SIGSEGV")
    assert failure.dedup_key[2:] == clean_frames(stderr, keep=2) and failure.dedup_key[2].endswith(":string_at")


def _dump_through(harness_file: str, caller: str) -> str:
    """faulthandler's dump of a crash in the op wrapper ``_sdpa`` (nn_losses.py), called
    from ``caller`` in a file named ``harness_file`` (how the worker reached it)."""
    script = textwrap.dedent(f"""
        import ctypes, faulthandler, pathlib, sys, tempfile
        faulthandler.enable()
        folder = pathlib.Path(tempfile.mkdtemp())
        (folder / "nn_losses.py").write_text("import os, signal\\ndef _sdpa():\\n    os.kill(os.getpid(), signal.SIGFPE)\\n")
        (folder / "{harness_file}").write_text("from nn_losses import _sdpa\\ndef {caller}():\\n    return _sdpa()\\n")
        sys.path.insert(0, str(folder))
        __import__("{harness_file[:-3]}").{caller}()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode < 0, done.stderr
    return done.stderr


def test_one_crash_reached_through_two_harness_paths_is_one_key():
    """An H200 run (docs/real-findings.md): CUDA's SDPA SIGFPE on empty inputs was filed twice, once per way the
    worker called the wrapper (the grad variant's ``executor.py:forward_backward``, the
    functional call's ``targets.py:run``). Keys read from such a corpus lose the frame too."""
    from mpsfuzz.oracles import Failure
    keys = set()
    for harness_file, caller in (("executor.py", "forward_backward"), ("targets.py", "run")):
        stderr = _dump_through(harness_file, caller)
        failure = check_crash(ProcessEvent(op="scaled_dot_product_attention", target_name="cuda", kind="died",
                                           returncode=-8, stderr_tail=stderr))
        assert f"{harness_file}\", line" in stderr   # the harness frame was in the dump
        assert failure.dedup_key == ("crash", "SIGFPE", "nn_losses.py:_sdpa"), failure.dedup_key
        keys.add(failure.dedup_key)
    assert len(keys) == 1
    old = Failure(oracle="crash", kind="crash", severity="critical", title="t", message="m",
                  dedup_key=("crash", "SIGFPE", "nn_losses.py:_sdpa", "executor.py:<lambda>"))
    assert Failure.from_json(old.to_json()).dedup_key == ("crash", "SIGFPE", "nn_losses.py:_sdpa")
    # a crash inside the harness itself keeps its frames (there are no others)
    assert clean_frames('  File "/x/mpsfuzz/execution/worker.py", line 3 in _answer\n', keep=2) == ("worker.py:_answer",)


def test_eager_cpus_crash_in_the_fault_target_and_in_the_reference_key_alike():
    """The fault target runs eager CPU: its ``run`` wrapper on the stack (as targets.py's
    own targets' ``run``) is the harness's, so a crash there and the same crash in the CPU
    reference have one key (triu into out= of its own negative view, a heap corruption,
    was filed twice). A fault's own effect function stays: that is where it crashes."""
    def dump(*frames):
        return "Fatal Python error: Aborted\n\n" + "".join(
            f'  File "/x/mpsfuzz/{path}", line 1 in {fn}\n' for path, fn in frames)
    in_target = dump(("generation/ops/linalg.py", "<lambda>"), ("testing/faults.py", "run"),
                     ("execution/executor.py", "run_side"))
    in_reference = dump(("generation/ops/linalg.py", "<lambda>"), ("execution/executor.py", "run_reference"))
    assert clean_frames(in_target, keep=2) == clean_frames(in_reference, keep=2) == ("linalg.py:<lambda>",)
    assert clean_frames(dump(("testing/faults.py", "_abort"), ("testing/faults.py", "run")), keep=2) \
        == ("faults.py:_abort",)


# Recorded stderr of two workers that died of one heap corruption (eager CPU's triu into
# out= of its own permuted negative view, torch 2.13, glibc): the allocator aborted at
# the heap's next use, once in the reference's op wrapper and once in the fault target.
_GLIBC_IN_REFERENCE = """free(): invalid next size (fast)
Fatal Python error: Aborted

Current thread 0x00007f3a1c2d8b80 (most recent call first):
  File "/work/main/mpsfuzz/generation/ops/elementwise.py", line 412 in <lambda>
  File "/work/main/mpsfuzz/execution/executor.py", line 201 in call_variant
  File "/work/main/mpsfuzz/execution/executor.py", line 431 in run_reference
  File "/work/main/mpsfuzz/execution/executor.py", line 788 in observe
  File "/work/main/mpsfuzz/oracles/judge.py", line 96 in judge_case

Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)
"""
_GLIBC_IN_TARGET = """double free or corruption (out)
Fatal Python error: Aborted

Current thread 0x00007fd0a41e1b80 (most recent call first):
  File "/work/main/mpsfuzz/generation/recipes.py", line 566 in materialize
  File "/work/main/mpsfuzz/testing/faults.py", line 1702 in run
  File "/work/main/mpsfuzz/execution/executor.py", line 535 in _run_dut
  File "/work/main/mpsfuzz/oracles/judge.py", line 96 in judge_case
"""
# macOS's malloc, as a Mac worker's stderr shows it
_MACOS_FREED = """python3.12(81234,0x1f0b2f240) malloc: *** error for object 0x600002c1c0a0: pointer being freed was not allocated
python3.12(81234,0x1f0b2f240) malloc: *** set a breakpoint in malloc_error_break to debug
Fatal Python error: Aborted

Current thread 0x00000001f0b2f240 (most recent call first):
  File "/Users/u/mpsfuzz/mpsfuzz/execution/executor.py", line 47 in _to_cpu
  File "/Users/u/mpsfuzz/mpsfuzz/execution/executor.py", line 312 in run_side
"""
_MACOS_CHECKSUM = """python3.12(81301,0x16d9ab000) malloc: Incorrect checksum for freed object 0x13f80a200: probably modified after being freed.
Corrupt value: 0x3f800000bf800000
python3.12(81301,0x16d9ab000) malloc: *** set a breakpoint in malloc_error_break to debug
Fatal Python error: Aborted

Current thread 0x000000016d9ab000 (most recent call first):
  File "/Users/u/mpsfuzz/mpsfuzz/generation/ops/linalg.py", line 692 in <lambda>
  File "/Users/u/mpsfuzz/mpsfuzz/execution/targets.py", line 88 in run
"""


def _died(stderr: str, op: str = "triu", returncode: int = -6) -> ProcessEvent:
    return ProcessEvent(op=op, target_name="mps", kind="died", returncode=returncode, stderr_tail=stderr)


def test_a_heap_corruption_keys_on_its_kind_and_op_not_its_frames():
    """glibc and macOS: two aborts of one heap corruption at different frames (and sides)
    are one key, and the title says what it is; their frames alone would be two keys."""
    from mpsfuzz.oracles import symptom_key
    from mpsfuzz.generation.recipes import Case, TensorRecipe
    for first, second in ((_GLIBC_IN_REFERENCE, _GLIBC_IN_TARGET), (_MACOS_FREED, _MACOS_CHECKSUM)):
        assert clean_frames(first, keep=2) != clean_frames(second, keep=2)
        a, b = check_crash(_died(first)), check_crash(_died(second))
        assert a.dedup_key == b.dedup_key == ("crash", "heap-corruption")
        case = Case("triu", (TensorRecipe((2, 2), "float32"),))
        assert symptom_key(case, a) == symptom_key(case, b) == ("triu", "crash", "crash", "heap-corruption")
        assert "corrupts the heap" in a.title and "keyed by the op, not by its frames" in a.message
    assert check_crash(_died(_GLIBC_IN_TARGET)).details["heap"] == "double free or corruption (out)"
    assert check_crash(_died(_MACOS_FREED)).details["heap"] == "pointer being freed was not allocated"
    # another op's heap corruption is another finding (the op is in every symptom)
    other = Case("cumsum", (TensorRecipe((2, 2), "float32"),))
    assert symptom_key(other, check_crash(_died(_GLIBC_IN_TARGET, "cumsum"))) != symptom_key(
        case, check_crash(_died(_GLIBC_IN_TARGET)))


def test_a_heap_corruption_aborting_in_the_reference_is_not_blamed_on_eager_cpu_by_its_frames():
    """The abort lands at the heap's next use: the reference running then says nothing of
    who damaged it (the target ran first). Undecided until triage runs eager CPU alone."""
    assert crashed_in_reference(_GLIBC_IN_REFERENCE)
    assert check_crash(_died(_GLIBC_IN_REFERENCE)).blame == "undecided"
    assert check_crash(_died(_GLIBC_IN_TARGET)).blame == "target"
    # a segfault in the reference without a heap message stays eager CPU's, keyed by frames
    plain = _GLIBC_IN_REFERENCE.replace("free(): invalid next size (fast)\n", "")
    assert check_crash(_died(plain, returncode=-11)).blame == "cpu"
    assert check_crash(_died(plain, returncode=-11)).dedup_key[2] == "elementwise.py:<lambda>"


def test_a_heap_corruption_recorded_under_its_frames_reads_as_one_key():
    from mpsfuzz.oracles import Failure
    old = Failure(oracle="crash", kind="crash", severity="critical", title="t",
                  message="worker died with SIGABRT; last stderr lines:\n" + _GLIBC_IN_TARGET,
                  dedup_key=("crash", "SIGABRT", "recipes.py:materialize"))
    assert Failure.from_json(old.to_json()).dedup_key == ("crash", "heap-corruption")


def test_a_real_allocators_abort_is_recognised_as_a_heap_corruption():
    """A process that frees one block twice: the allocator's own abort (glibc: "free():
    double free detected in tcache 2"; macOS: "pointer being freed was not allocated"),
    as faulthandler's worker shows it, is keyed as a heap corruption."""
    script = textwrap.dedent("""
        import ctypes, faulthandler
        faulthandler.enable()
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        p = libc.malloc(24)
        libc.free(p)
        libc.free(p)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -6, done.stderr
    failure = check_crash(_died(done.stderr))
    assert failure.dedup_key == ("crash", "heap-corruption") and failure.details["signal"] == "SIGABRT", done.stderr


def test_triage_decides_a_heap_corruptions_side_by_eager_cpu_alone(monkeypatch):
    """Not by the abort's frames: eager CPU alone (a fresh worker, both sides eager CPU)
    corrupting its heap too makes it eager CPU's bug whichever side aborted; eager CPU
    alone running clean makes it the target's, although the reference was running at the
    abort; eager CPU alone ending otherwise decides nothing."""
    from mpsfuzz.execution.outcome import CaseOutcome
    from mpsfuzz.generation.recipes import Case, TensorRecipe
    from mpsfuzz.triage import pipeline
    case = Case("triu", (TensorRecipe((2, 2), "float32"),))
    in_reference, in_target = check_crash(_died(_GLIBC_IN_REFERENCE)), check_crash(_died(_GLIBC_IN_TARGET))
    assert pipeline.is_heap_corruption(in_reference)

    def decided(failure, alone):
        monkeypatch.setattr(pipeline, "on_cpu_alone", lambda *a, **k: alone)
        return pipeline.heap_corruption_blame(case, failure, None, ("crash",), 5.0)
    cpu_too = _died(_GLIBC_IN_TARGET)
    for failure in (in_reference, in_target):
        assert decided(failure, cpu_too).blame == "cpu"
        assert "corrupts the heap on eager CPU" in decided(failure, cpu_too).title
        clean = decided(failure, CaseOutcome(valid=True))
        assert clean.blame == "target" and "the target's call did" in clean.message
        assert decided(failure, _died("Fatal Python error: Segmentation fault\n", returncode=-11)) == failure
        assert decided(failure, None) == failure
        assert decided(failure, CaseOutcome(valid=True, internal_error="Traceback ...")) == failure
    # a crash of another kind keeps the signal rule
    assert not pipeline.is_heap_corruption(check_crash(_died("Fatal Python error: Segmentation fault\n", returncode=-11)))


def test_the_workers_last_words_keep_the_allocators_message_before_the_dump():
    """A worker's stderr log: earlier chatter, glibc's message, then faulthandler's dump.
    The tail cut at the dump lost the message, and the heap corruption read as a plain
    SIGABRT keyed by its frames (the daemon's resume test filed triu twice)."""
    from mpsfuzz.execution.worker import dump_with_its_cause
    log = "a warning of an earlier case\n" * 50 + _GLIBC_IN_TARGET
    tail = dump_with_its_cause(log)
    assert tail.splitlines()[:4] == ["a warning of an earlier case"] * 2 + [
        "double free or corruption (out)", "Fatal Python error: Aborted"]
    assert check_crash(_died(tail)).dedup_key == ("crash", "heap-corruption")
    # no dump: the last lines
    assert dump_with_its_cause("x\n" * 100, max_lines=5) == "x\nx\nx\nx\nx"


def test_glibcs_fastbin_abort_is_a_heap_corruption():
    """glibc's "invalid fastbin entry (free)" names no function: missed, a real heap
    corruption's abort was keyed by its frames, a second finding of one bug."""
    tail = _GLIBC_IN_REFERENCE.replace("free(): invalid next size (fast)", "invalid fastbin entry (free)")
    assert tail != _GLIBC_IN_REFERENCE
    assert check_crash(_died(tail)).dedup_key == ("crash", "heap-corruption")
    assert check_crash(_died(tail)).details["heap"] == "invalid fastbin entry (free)"


def test_a_crash_that_eager_cpu_alone_shares_is_filed_before_the_targets_reduction(monkeypatch):
    """Blame first: a reliable heap corruption that eager CPU alone shows too is eager
    CPU's bug, filed without reduction or ablation (the target's budget); one that eager
    CPU alone runs clean goes through them, its side decided again on the minimal case."""
    from mpsfuzz.execution.outcome import CaseOutcome
    from mpsfuzz.generation.recipes import Case, TensorRecipe
    from mpsfuzz.triage import pipeline
    case = Case("triu", (TensorRecipe((2, 2), "float32"),))
    failure = check_crash(_died(_GLIBC_IN_REFERENCE))
    monkeypatch.setattr(pipeline, "reproduce", lambda *a, **k: pipeline.Reproducibility(4, 4, True))
    monkeypatch.setattr(pipeline, "localise", lambda *a, **k: {"status": "not-localised"})
    reduced = []

    class Stop(Exception):
        pass

    def reduce_case(*a, **k):
        reduced.append(True)
        raise Stop
    monkeypatch.setattr(pipeline, "reduce_case", reduce_case)
    monkeypatch.setattr(pipeline, "on_cpu_alone", lambda *a, **k: _died(_GLIBC_IN_TARGET))
    done = pipeline.triage(case, failure, object(), ("crash",), timeout_s=5.0)
    assert done.failure.blame == "cpu" and not done.flaky and not reduced
    assert done.reduction is None and done.explanation is None and "cpu-alone" in done.steps
    monkeypatch.setattr(pipeline, "on_cpu_alone", lambda *a, **k: CaseOutcome(valid=True))
    with pytest.raises(Stop):
        pipeline.triage(case, failure, object(), ("crash",), timeout_s=5.0)
    assert reduced


def test_eager_cpu_alone_runs_a_heap_corruption_once_where_reduction_kept_the_case(monkeypatch):
    """The side decided before reduction stands where the minimal case is the case
    itself: another fresh worker for eager CPU alone would answer the same question."""
    from types import SimpleNamespace

    from mpsfuzz.execution.outcome import CaseOutcome
    from mpsfuzz.generation.recipes import Case, TensorRecipe
    from mpsfuzz.triage import pipeline
    case = Case("triu", (TensorRecipe((2, 2), "float32"),))
    failure = check_crash(_died(_GLIBC_IN_REFERENCE))
    monkeypatch.setattr(pipeline, "reproduce", lambda *a, **k: pipeline.Reproducibility(4, 4, True))
    monkeypatch.setattr(pipeline, "localise", lambda *a, **k: {"status": "not-localised"})
    monkeypatch.setattr(pipeline, "reduce_case", lambda *a, **k: SimpleNamespace(case=case, failure=failure))
    monkeypatch.setattr(pipeline, "explain", lambda *a, **k: None)
    monkeypatch.setattr(pipeline, "shown_eagerly", lambda *a, **k: None)
    runs = []

    def alone(*a, **k):
        runs.append(a[0])
        return CaseOutcome(valid=True)
    monkeypatch.setattr(pipeline, "on_cpu_alone", alone)
    done = pipeline.triage(case, failure, SimpleNamespace(target_name="cuda"), ("crash",), timeout_s=5.0)
    assert runs == [case]
    assert done.failure.blame == "target" and "the target's call did" in done.failure.message


def test_an_input_with_a_view_bit_is_not_the_layout_oracles_copy_of_itself():
    """A layout failure of a contiguous case is state-dependent only where the oracle's
    copies are the inputs; a negative or conjugate bit is resolved in the copies, so a
    kernel that ignores the bit (eager CPU's copy_ of float32 into a float16 negative
    view) is a layout bug, not a flaky one."""
    from dataclasses import replace

    from mpsfuzz.generation.recipes import Case, TensorRecipe
    from mpsfuzz.triage.pipeline import _contiguous_already
    dst, src = TensorRecipe((3,), "float16"), TensorRecipe((3,), "float32")
    assert _contiguous_already(Case("copy_", (dst, src)))
    negative = replace(dst, layout=replace(dst.layout, bit="neg"))
    assert not _contiguous_already(Case("copy_", (negative, src)))
