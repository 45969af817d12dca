"""Every finding has a script that reproduces it, whatever the op, its family and the way
it is called.

The broad faults of :mod:`mpsfuzz.testing.faults` misbehave in every kernel of a kind
(every forward kernel corrupts its outputs, raises, aborts, hangs or leaks; every
backward kernel corrupts its gradients or aborts; every random kernel draws from a moved
distribution). For an op of each family called in each of its variants (functional,
method, in-place, ``out=`` dense, strided and resized, grad), and for random ops,
crashes, hangs and leaks, the fuzzer's worker runs drawn cases under such a fault until
one fails; the failure becomes a finding as the engine makes it, its script is generated
and verified in a fresh interpreter (``repro_for(verify=True)``, as every new finding of
a campaign is), and then run as ``python repro.py`` on eager CPU without any fault, where
it must run to the end: a script that fails for its own reasons (a helper it does not
define, a gradient of the wrong shape, another call than the worker's) cannot pass.

The default run takes a sample that covers every family, every variant and every kind
of finding (each verification starts an interpreter that imports torch: a few seconds);
``-m slow`` runs every op of the catalogue in each of its variants and prints the numbers.
"""
from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mpsfuzz.corpus.finding import Finding
from mpsfuzz.execution.executor import is_unsupported
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation import catalogue, opspec
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports import repro as repro_module
from mpsfuzz.reports.repro import ReproError, Script, repro_for
from mpsfuzz.triage.probe import Prober

FAULT_TARGET = "mpsfuzz.testing.faults:target"
# Verifications run in threads, each a fresh interpreter importing torch.
THREADS = max(3, min(4, os.cpu_count() or 2))
# A script's time limit here: the scripts of the large class build ~600,000-element inputs
# and run THREADS at a time on a loaded 2-core machine; what is checked is that they show
# the finding, not how fast.
VERIFY_TIMEOUT_S = 150
# Cases drawn per op and variant before giving up on a failure (most ops fail at once).
CANDIDATES = 30
HANG_TIMEOUT_S = 3.0

# What each kind of finding is drawn from: the broad fault for the forward variants and
# the one for the grad variant (None: the kind does not use that variant).
KINDS = {
    "values": ("every_kernel_corrupt", None),
    "grads": (None, "every_backward_kernel_corrupt"),
    "distribution": ("every_random_kernel_skew", None),
    "errors": ("every_kernel_raise", "every_backward_kernel_raise"),
    "crash": ("every_kernel_abort", "every_backward_kernel_abort"),
    "hang": ("every_kernel_hang", "every_backward_kernel_hang"),
    "leak": ("every_kernel_leak", "every_backward_kernel_leak"),
}


@dataclass(frozen=True)
class Job:
    op: str
    variant: str
    kind: str

    @property
    def fault(self) -> str:
        forward, backward = KINDS[self.kind]
        return backward if self.variant == "grad" else forward


@dataclass
class Outcome:
    job: Job
    finding: Finding | None = None
    problem: str = ""                 # why the script is not a repro ("" when it is)
    script: str = ""
    stats: dict = field(default_factory=dict)


def _candidates(spec, variant: str, seed: int) -> list:
    """Cases of ``spec`` called as ``variant``: drawn ones of that variant first, then
    other drawn cases called that way."""
    drawn = example_cases(spec, CANDIDATES, seed=seed, max_side=5, max_numel=256)
    same = [c for c in drawn if c.variant == variant]
    other = [dataclasses.replace(c, variant=variant) for c in drawn if c.variant != variant]
    return (same + other)[:CANDIDATES]


def _wanted(kind: str, failure) -> bool:
    if kind == "values":  # any failure of the results: values, metadata, variants, layout...
        return failure.oracle not in ("crash", "hang", "leak", "distribution", "grads")
    return failure.oracle == kind


def _clean_cpu_contradicts_itself(case) -> bool:
    """Whether eager CPU, the backend a script runs on without the fault, gives another
    result in the case's variant than in its functional form (the variants oracle on the
    plain ``cpu`` target): no script can then pass without the fault. eager CPU's
    baddbmm into an ``out=`` that is its own input viewed with the conjugate bit returns
    the conjugate of its functional result: that is eager CPU's bug, not the script's."""
    if case.variant in ("functional", "grad", "autocast"):
        return False
    from mpsfuzz.execution.targets import load_target
    from mpsfuzz.oracles.judge import judge_case
    return any(f["oracle"] == "variants" for f in judge_case(case, load_target("cpu"), ("variants",)).failures)


def find_finding(prober: Prober, job: Job, seed: int = 0) -> Finding | None:
    """The first failure of ``job``'s kind that a drawn case shows under its fault, as
    the engine records it (Finding.create, no triage); None if none of the candidates
    fails that way."""
    spec = catalogue.get(job.op)
    for case in _candidates(spec, job.variant, seed):
        failures, _valid, _died = prober.failures(case)
        for failure in failures:
            if _wanted(job.kind, failure) and failure.blame == "target" and not _clean_cpu_contradicts_itself(case):
                pool = prober.pool
                return Finding.create(case, failure, target_name=pool.target_name, target_spec=FAULT_TARGET,
                                      device=pool.device)
    return None


def run_clean(script: Script) -> tuple[int | None, str]:
    """(exit status, output) of ``script`` run as a user without the bug would run it:
    ``python repro.py`` on eager CPU, no target, no fault (None: it did not finish)."""
    with tempfile.TemporaryDirectory(prefix="mpsfuzz-clean-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(script.text)
        try:
            done = subprocess.run([sys.executable, str(path)], cwd=tmp, capture_output=True, text=True,
                                  timeout=VERIFY_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, "(did not finish)"
    return done.returncode, (done.stdout + done.stderr)[-3000:]


def _clean_failure(returncode: int | None, output: str) -> str:
    """Why a clean run is not clean ("" when it ran to the end). An error saying that eager
    CPU has no kernel for the dtype is not the script's fault: the broad fault fired before
    the kernel could say so (a crash of complex32 scatter, say)."""
    if returncode == 0:
        return ""
    last = [ln for ln in output.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
    if returncode is not None and is_unsupported(Exception(last[0])) and "Error" in last[0]:
        return ""
    return f"exit {returncode}: {last[0]}"


def check_script(outcome: Outcome) -> Outcome:
    """Verify the finding's script with its fault on (through repro_for, as a campaign
    does: MPSFUZZ_FAULTS is the fault's in this process) and run it with the faults off."""
    start = time.monotonic()
    try:
        return _check_script(outcome)
    finally:
        outcome.stats["seconds"] = time.monotonic() - start
        if outcome.problem:  # shown as it happens in a long run (pytest -s)
            sys.stdout.write(f"FAILING {outcome.job}: {outcome.problem.splitlines()[0]}\n")
            sys.stdout.flush()


def _check_script(outcome: Outcome) -> Outcome:
    try:
        record = repro_for(outcome.finding, verify=True, timeout_s=VERIFY_TIMEOUT_S)
    except ReproError as exc:
        outcome.problem = f"no script: {exc}"
        return outcome
    outcome.script = record["script"]
    if record["verified"] is not True:
        outcome.problem = f"not verified: {record['detail']}\n{record.get('output', '')[-1500:]}"
        return outcome
    script = Script(text=record["script"], expect=record["expect"], body_lines=record["lines"])
    returncode, output = run_clean(script)
    problem = _clean_failure(returncode, output)
    if problem:
        outcome.problem = f"without the fault: {problem}\n{output[-1500:]}"
    return outcome


def _one_at_a_time(generate):
    """``generate`` behind a lock: CPython 3.11's ast.parse is not safe in threads ("AST
    constructor recursion depth mismatch"); a campaign generates one script at a time."""
    lock = threading.Lock()

    def locked(*args, **kwargs):
        with lock:
            return generate(*args, **kwargs)
    return locked


def run_jobs(jobs: list[Job], monkeypatch, *, pick_one_of: dict | None = None) -> list[Outcome]:
    """Find a finding for each job and check its script. ``pick_one_of`` maps a label to
    a list of jobs of which only the first that yields a finding is kept (a sample that
    does not shrink when one op cannot fail that way)."""
    monkeypatch.setattr(repro_module, "generate", _one_at_a_time(repro_module.generate))
    # THREADS scripts run at once beside the other xdist workers: one intra-op thread each,
    # or their OpenMP pools oversubscribe 2 cores (a large-class conv2d script took over
    # a minute under CI's load, 5 s alone).
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    groups: dict[str, list] = {}
    for job in jobs:
        groups.setdefault(job.fault, []).append([job])
    for alternatives in (pick_one_of or {}).values():
        groups.setdefault(alternatives[0].fault, []).append(list(alternatives))
    outcomes: list[Outcome] = []
    for fault, entries in sorted(groups.items()):
        monkeypatch.setenv("MPSFUZZ_FAULTS", fault)
        timeout = HANG_TIMEOUT_S if "hang" in fault else 20.0
        pool = WorkerPool(FAULT_TARGET, timeout_s=timeout, execute=judge_case)
        found: list[Outcome] = []
        try:
            prober = Prober(pool, DEFAULT, timeout_s=timeout)
            for alternatives in entries:
                for job in alternatives:
                    finding = find_finding(prober, job)
                    if finding is not None:
                        found.append(Outcome(job, finding))
                        break
                else:
                    if len(alternatives) == 1:
                        outcomes.append(Outcome(alternatives[0], problem="no finding drawn"))
                    else:
                        outcomes.append(Outcome(alternatives[0], problem=f"no finding drawn from any of "
                                                f"{', '.join(j.op for j in alternatives)}"))
        finally:
            pool.close()
        with ThreadPoolExecutor(THREADS) as threads:
            outcomes += list(threads.map(check_script, found))
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    scripts = [o for o in outcomes if o.finding is not None]
    failing = [o for o in scripts if o.problem]
    lines = [f"{len(outcomes)} jobs, {len(scripts)} findings with scripts, "
             f"{len(scripts) - len(failing)} verified and clean, {len(failing)} failing, "
             f"{len(outcomes) - len(scripts)} without a finding"]
    by_kind = Counter((o.job.kind, "ok" if not o.problem else "failing") for o in scripts)
    lines.append("  by kind: " + ", ".join(f"{k} {v}: {n}" for (k, v), n in sorted(by_kind.items())))
    oracles = Counter(o.finding.failure.oracle for o in scripts)
    lines.append("  findings by oracle: " + ", ".join(f"{k}: {n}" for k, n in sorted(oracles.items())))
    for o in failing:
        first = o.problem.splitlines()[0] if o.problem else ""
        lines.append(f"  FAILING {o.job.op} [{o.job.variant}] {o.job.kind} ({o.finding.failure.oracle}): {first}")
    slowest = sorted(scripts, key=lambda o: -o.stats.get("seconds", 0))[:5]
    lines.append("  slowest checks: " + ", ".join(f"{o.job.op} [{o.job.variant}] {o.job.kind} "
                                                  f"{o.stats.get('seconds', 0):.1f}s" for o in slowest))
    for o in outcomes:
        if o.finding is None:
            lines.append(f"  no finding: {o.job.op} [{o.job.variant}] {o.job.kind}")
    return "\n".join(lines)


def _details(failing: list[Outcome]) -> str:
    return "\n\n".join(f"== {o.job} ==\n{o.problem}\n--- script ---\n{o.script}" for o in failing[:10])


# -- every op's call renders to source that defines what it uses ------------------------

def _undefined_names(source: str) -> set[str]:
    """Names the source reads that nothing in it binds (nor builtins, nor torch)."""
    import ast
    import builtins
    tree = ast.parse(source)
    bound = {"torch"} | set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - bound


def test_every_ops_call_renders_to_source_that_defines_what_it_uses():
    """No interpreter needed: the call of every op (inlined or copied, with the helpers
    it calls under whatever name) reads no name the script does not define (the division
    family's ``_nz`` alias once did)."""
    from mpsfuzz.reports.source import Rendering, SourceError
    undefined, unrenderable = {}, {}
    for name, spec in sorted(catalogue.all_ops().items()):
        render = Rendering()
        args = [f"t{i}" for i in range(spec.arity)]
        try:
            call = render.call(spec.fn, args, {})
        except SourceError as exc:
            unrenderable[name] = str(exc)
            continue
        source = "\n".join([*render.helpers.values(), *(f"{a} = None" for a in args), f"result = {call}"])
        missing = _undefined_names(source)
        if missing:
            undefined[name] = sorted(missing)
    assert not undefined, undefined
    assert not unrenderable, unrenderable


@pytest.mark.parametrize("op, shapes", [
    ("gru_cell", [(0, 2), (0, 3), (9, 2), (9, 3), (9,), (9,)]),
    ("lstm_cell", [(0, 2), (0, 3), (0, 3), (12, 2), (12, 3), (12,), (12,)]),
])
def test_gradient_scripts_of_empty_outputs_keep_their_shape(op, shapes):
    """An empty batch makes empty outputs whose upstream gradient has no elements: the
    script must make it with the output's shape (a literal ``[]`` is 1-d: "Mismatch in
    shape: grad_output[0] has a shape of torch.Size([0])"). Run in this process on eager
    CPU, without any fault, the script runs to the end."""
    from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
    from mpsfuzz.oracles import Failure
    from mpsfuzz.reports.repro import generate
    inputs = tuple(TensorRecipe(shape, "float32", Layout(), ValueRecipe(distribution="normal", seed=3 + i))
                   for i, shape in enumerate(shapes))
    case = Case(op, inputs, variant="grad")
    failure = Failure(oracle="grads", kind="wrong-grad", severity="high", title=f"`{op}` backward is wrong",
                      message=f"gradient of input {len(shapes) - 1} differs")
    finding = Finding.create(case, failure, target_name="faulty-cpu", target_spec=FAULT_TARGET, device="cpu")
    script = generate(finding)
    upstream = next(line for line in script.text.splitlines() if line.startswith("g = "))
    assert "torch.empty((0, 3)" in upstream, upstream
    exec(compile(script.text, "repro.py", "exec"), {"__name__": "__main__"})


# -- the sample: every family x variant, and every kind of finding ---------------------

def _ops_with(family: str | None, variant: str, *, random_ops: bool) -> list[str]:
    ops = [name for name, spec in sorted(catalogue.all_ops().items())
           if (family is None or spec.family == family) and variant in spec.variants()
           and ("random" in spec.semantics) == random_ops]
    random.Random(f"{family}:{variant}").shuffle(ops)
    return ops


def sample_jobs() -> dict[str, list[Job]]:
    """label -> alternatives (the first op of them that yields a finding is checked).
    Values and gradients: each variant in two families, every family at least once;
    random ops in three variants; crashes, hangs, leaks and errors in the variants where
    the worker's calls differ most (out=, in-place, grad)."""
    sample: dict[str, list[Job]] = {}
    families = sorted({spec.family for spec in catalogue.all_ops().values()} - {"random"})
    random.Random(12).shuffle(families)
    used = Counter()
    for variant in opspec.VARIANTS:
        kind = "grads" if variant == "grad" else "values"
        having = [f for f in families if _ops_with(f, variant, random_ops=False)]
        for family in sorted(having, key=lambda f: used[f])[:2]:
            used[family] += 1
            ops = _ops_with(family, variant, random_ops=False)
            sample[f"{family}/{variant}/{kind}"] = [Job(op, variant, kind) for op in ops[:6]]
    for family in families:   # a family of functional ops alone (large sizes) once too
        if not used[family]:
            sample[f"{family}/functional/values"] = [Job(op, "functional", "values")
                                                     for op in _ops_with(family, "functional", random_ops=False)[:6]]
    for variant in ("functional", "method", "out-strided"):
        ops = _ops_with(None, variant, random_ops=True)
        sample[f"random/{variant}"] = [Job(op, variant, "distribution") for op in ops[:6]]
    process_variants = {"crash": ("functional", "inplace", "out-resized", "grad"), "hang": ("out", "grad"),
                        "leak": ("out-resized", "inplace", "grad"), "errors": ("out", "grad")}
    for kind, variants in process_variants.items():
        for variant in variants:
            ops = _ops_with(None, variant, random_ops=False)
            sample[f"{kind}/{variant}"] = [Job(op, variant, kind) for op in ops[:6]]
    return sample


# The sample runs in parts that xdist spreads over its workers (one test of it all took
# over three minutes under CI's load): a part per fault, the larger faults in parts of
# at most CHUNK labels, each part with its own worker pool.
CHUNK = 6


def sample_parts() -> dict[str, dict[str, list[Job]]]:
    by_fault: dict[str, dict[str, list[Job]]] = {}
    for label, alternatives in sample_jobs().items():
        by_fault.setdefault(alternatives[0].fault, {})[label] = alternatives
    parts = {}
    for fault, labelled in sorted(by_fault.items()):
        labels = sorted(labelled)
        for start in range(0, len(labels), CHUNK):
            name = fault if len(labels) <= CHUNK else f"{fault}-{start // CHUNK + 1}"
            parts[name] = {label: labelled[label] for label in labels[start:start + CHUNK]}
    return parts


SAMPLE_PARTS = sample_parts()


def test_the_sample_covers_every_family_variant_and_kind_of_finding():
    """Every label of the sample must yield a verified script (the parts below fail on
    one without a finding), so the labels' coverage is the checked scripts' coverage."""
    sample = {label: alts for part in SAMPLE_PARTS.values() for label, alts in part.items()}
    assert sample == sample_jobs()
    one_family = [alts for alts in sample.values() if len({catalogue.get(j.op).family for j in alts}) == 1]
    assert {catalogue.get(alts[0].op).family for alts in one_family} == \
        {s.family for s in catalogue.all_ops().values()}
    assert {alts[0].variant for alts in sample.values() if len({j.variant for j in alts}) == 1} == \
        set(opspec.VARIANTS)
    assert {alts[0].kind for alts in sample.values()} >= {"values", "grads", "distribution", "errors", "crash",
                                                          "hang", "leak"}


@pytest.mark.slow
@pytest.mark.parametrize("part", sorted(SAMPLE_PARTS))
def test_every_family_and_variant_has_a_script_that_reproduces_its_finding(part, monkeypatch):
    outcomes = run_jobs([], monkeypatch, pick_one_of=SAMPLE_PARTS[part])
    print(summary(outcomes))
    assert len(outcomes) == len(SAMPLE_PARTS[part])
    failing = [o for o in outcomes if o.problem]
    assert not failing, summary(outcomes) + "\n\n" + _details(failing)
    # Each finding is of its label's kind (find_finding keeps no other); among the wrong
    # results of a part, the values oracle's own.
    if any(o.job.kind == "values" for o in outcomes):
        assert "values" in {o.finding.failure.oracle for o in outcomes}, summary(outcomes)


@pytest.mark.soak
def test_every_op_and_variant_has_a_script_that_reproduces_its_finding(monkeypatch):
    """The whole catalogue: every op in each of its variants (values or distribution;
    gradients for grad), a crash of an op per family and variant, and the sample's
    errors, hangs and leaks."""
    jobs = []
    for name, spec in sorted(catalogue.all_ops().items()):
        random_op = "random" in spec.semantics
        for variant in spec.variants():
            kind = "distribution" if random_op else ("grads" if variant == "grad" else "values")
            jobs.append(Job(name, variant, kind))
    sample = {label: alternatives for label, alternatives in sample_jobs().items()
              if alternatives[0].kind in ("errors", "hang", "leak")}
    # Crashes: an op of each family in each variant (the calls a crash script makes
    # depend on the variant; the op's own source is what the values scripts cover).
    for family in sorted({spec.family for spec in catalogue.all_ops().values()}):
        for variant in opspec.VARIANTS:
            ops = _ops_with(family, variant, random_ops=family == "random")
            if ops:
                sample[f"crash/{family}/{variant}"] = [Job(op, variant, "crash") for op in ops[:6]]
    outcomes = run_jobs(jobs, monkeypatch, pick_one_of=sample)
    text = summary(outcomes)
    sys.stdout.write(text + "\n")
    failing = [o for o in outcomes if o.problem and o.finding is not None]
    assert not failing, text + "\n\n" + _details(failing)


@pytest.mark.slow
def test_opinfo_ops_have_scripts_that_call_the_op_as_a_reader_would(monkeypatch):
    """An OpInfo op's case encodes its call (the template's arguments as JSON): the
    script decodes it into the plain call (``torch.cdist(a, b, 0.0, ...)``), for every
    OpInfo op, and such a script reproduces its finding (values, grads, a crash)."""
    from mpsfuzz.generation import opinfo
    from mpsfuzz.reports.source import Rendering
    available, why = opinfo.available()
    assert available, why  # MPSFUZZ_REQUIRE_OPINFO: the test extras install expecttest
    names = catalogue.select("opinfo")
    unrendered = {}
    for name in names:
        spec = catalogue.get(name)
        for case in example_cases(spec, 1, seed=0):
            render = Rendering()
            tensors = [f"t{i}" for i in range(len(case.inputs))]
            try:
                call = render.call(spec.fn, tensors, {k: repr(v) for k, v in case.kwargs})
            except Exception as exc:  # noqa: BLE001 - listed below
                unrendered[name] = f"{type(exc).__name__}: {exc}"
                continue
            assert "call=" not in call and "opinfo" not in call, call
            source = "\n".join([*render.helpers.values(), *(f"{t} = None" for t in tensors), f"r = {call}"])
            assert not _undefined_names(source), (name, call)
    assert not unrendered, unrendered
    ops = [n for n in ("opinfo:cdist", "opinfo:_softmax_backward_data", "opinfo:block_diag", "opinfo:__rmatmul__")
           if n in names]
    assert ops
    sample = {"opinfo/values": [Job(op, "functional", "values") for op in ops],
              "opinfo/crash": [Job(op, "functional", "crash") for op in ops[::-1]]}
    outcomes = run_jobs([], monkeypatch, pick_one_of=sample)
    failing = [o for o in outcomes if o.problem]
    assert not failing, summary(outcomes) + "\n\n" + _details(failing)
    assert len([o for o in outcomes if o.finding is not None]) == 2


def test_a_crash_finding_s_script_is_written_without_running_its_case_here(monkeypatch):
    """The generator runs in the campaign's own process, and eager CPU crashes on some
    inputs (torch 2.13's float16 convolution backward segfaults): a soak's daemon died
    writing the script of such a crash finding. Some crashes are in shape logic the meta
    device runs too (issue 30, H200: SDPA's GQA over zero key heads, SIGFPE, killed the
    campaign). For a crash finding the op runs nowhere here: the script takes the
    gradient of whatever outputs it gets when it runs."""
    monkeypatch.setenv("MPSFUZZ_FAULTS", "every_backward_kernel_abort")
    pool = WorkerPool(FAULT_TARGET, timeout_s=20.0, execute=judge_case)
    try:
        finding = find_finding(Prober(pool, DEFAULT, timeout_s=20.0), Job("conv_transpose2d", "grad", "crash"))
    finally:
        pool.close()
    assert finding is not None and finding.failure.oracle == "crash"
    spec = catalogue.get("conv_transpose2d")
    on_cpu = []

    script = repro_module.generate(finding).text
    assert "torch.autograd.grad(out, " in script and "device under test" in script, script
    # run in a fresh interpreter on the target, it dies as the finding did
    assert repro_module.repro_for(finding, verify=True, timeout_s=60)["verified"] is True

    def guarded(*args, **kwargs):
        import torch
        on_cpu.append([(a.device.type, tuple(a.shape)) for a in args if isinstance(a, torch.Tensor)])
        return spec.fn(*args, **kwargs)
    monkeypatch.setitem(catalogue.REGISTRY, "conv_transpose2d", dataclasses.replace(spec, fn=guarded))
    try:
        repro_module.generate(finding)
    except ReproError:
        pass   # (the guard's source may not render: what matters is that it never ran)
    assert not on_cpu, on_cpu


def test_an_out_tensor_learnt_in_a_child_that_dies_is_no_script_and_no_death(monkeypatch):
    """The out= tensors of a crash or hang finding are learnt in a child interpreter
    (repro.py, ``_result_metadata_in_a_child``): the child dying is no script, and the
    campaign's process goes on."""
    from mpsfuzz.generation.recipes import Case as _Case
    case = _Case.from_json({"format": 3, "op": "max_dim", "variant": "out-resized", "inputs": [
        {"shape": [2, 3], "dtype": "float32", "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "normal", "seed": 1, "low": None, "high": None, "specials": []}, "alias": None}],
        "kwargs": {"dim": 1}})
    import torch
    values, indices = repro_module._result_metadata_in_a_child(case)
    assert (tuple(values.shape), values.dtype, indices.dtype) == ((2,), torch.float32, torch.int64)
    monkeypatch.setattr(repro_module, "_CHILD_INFERENCE", "import os; os.abort()")
    with pytest.raises(ReproError, match="dies or hangs"):
        repro_module._result_metadata_in_a_child(case)
