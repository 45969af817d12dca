"""Users' kernels (issue 14 point 2): ``@mpsfuzz.kernel`` declarations are validated with a
one-line error, become ops of the ``kernels`` family judged against their own reference,
and ``mpsfuzz run --kernels FILE --target cpu`` finds each buggy torch.library example of
``examples/kernels/`` and nothing in its correct form."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mpsfuzz
from mpsfuzz.corpus.bugs import group as group_bugs
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.generation import catalogue, kernels
from mpsfuzz.generation.settings import KERNELS_ENV
from mpsfuzz.generation.strategies import example_cases

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "kernels"


def mpsfuzz_cli(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(KERNELS_ENV, None)   # a user's own kernel files, by hand: not this test's
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-m", "mpsfuzz", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def findings_in(corpus: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]


@pytest.fixture
def clean_registry():
    """Kernels declared by a test leave the catalogue with it."""
    catalogue.all_ops()
    before = dict(catalogue.REGISTRY)
    yield
    for name in [n for n in catalogue.REGISTRY if n not in before]:
        catalogue.REGISTRY.pop(name)


def _double(x):
    return x * 2


# -- the declaration API -------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, fragment", [
    (dict(dtypes=[]), "dtypes=[]"),
    (dict(dtypes="float32"), "dtypes='float32'"),
    (dict(dtypes=["float33"]), "dtypes=['float33']"),
    (dict(min_dims=-1), "min_dims=-1"),
    (dict(min_dims=3, max_dims=2), "min_dims=3 and max_dims=2"),
    (dict(max_dims=9), "max_dims=9"),
    (dict(max_side=0), "max_side=0"),
    (dict(min_side=5, max_side=4), "max_side=4"),
    (dict(multiple_of=4), "multiple_of=4"),
    (dict(multiple_of=(-1, 0), min_dims=1), "multiple_of=(-1, 0)"),
    (dict(multiple_of=(-1, 4)), "multiple_of=(-1, 4): dim -1"),
    (dict(contiguous="yes"), "contiguous='yes'"),
    (dict(low=2.0, high=1.0), "low=2.0 and high=1.0"),
    (dict(low=float("nan")), "low=nan"),
    (dict(allow_specials=1), "allow_specials=1"),
    (dict(like=-1), "like=-1"),
    (dict(large="yes"), "large='yes'"),
    (dict(large=True, contiguous=True), "large=True with contiguous=True"),
    (dict(large=True, like=0), "large=True with like="),
    (dict(large=True, max_dims=0), "large=True with max_dims=0"),
])
def test_a_bad_tensor_declaration_is_a_one_line_error_naming_it(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        mpsfuzz.tensor(**kwargs)
    message = str(info.value)
    assert fragment in message and "\n" not in message, message


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(reference=None, inputs=[mpsfuzz.tensor()]), "reference=None"),
    (dict(reference=_double, inputs=[]), "inputs=[]"),
    (dict(reference=_double, inputs=["x"]), "inputs[0]='x'"),
    (dict(reference=_double, inputs=[mpsfuzz.tensor(like=0)]), "inputs[0]: like=0"),
    (dict(reference=_double, inputs=[mpsfuzz.tensor()], args={"alpha": []}), "args={'alpha': []}"),
    (dict(reference=_double, inputs=[mpsfuzz.tensor()], args={"not a name": [1]}), "args="),
    (dict(reference=_double, inputs=[mpsfuzz.tensor()], name="a,b"), "name='a,b'"),
    (dict(reference=_double, inputs=[mpsfuzz.tensor()], name="add"), "name='add' is taken by a built-in op"),
    (dict(reference=_double, inputs=[mpsfuzz.tensor()], rtol_scale=0), "rtol_scale=0"),
])
def test_a_bad_kernel_declaration_is_a_one_line_error_naming_it(kwargs, fragment, clean_registry):
    def my_kernel(x):
        return x * 2
    with pytest.raises(ValueError) as info:
        mpsfuzz.kernel(**kwargs)(my_kernel)
    message = str(info.value)
    assert fragment in message and "\n" not in message, message
    assert "my_kernel" not in catalogue.REGISTRY


def test_a_kernel_is_an_op_of_the_kernels_family_with_its_reference(clean_registry):
    @mpsfuzz.kernel(reference=_double, inputs=[mpsfuzz.tensor(dtypes=["float32", "float16"], min_dims=1)],
                    args={"alpha": [1.0, 2.0]})
    def my_scale(x, alpha):
        return x * 2

    assert my_scale(torch.ones(2), 1.0).tolist() == [2.0, 2.0]   # the kernel, unchanged
    spec = catalogue.get("my_scale")
    assert spec.family == "kernels" and "my_scale" in catalogue.families()["kernels"]
    assert catalogue.select("my_scale") == ["my_scale"]
    assert spec.fn is my_scale and spec.as_reference().fn is _double
    assert spec.source_file == os.path.realpath(__file__)


def test_declared_shapes_values_and_layouts_are_what_is_drawn(clean_registry):
    decl = [mpsfuzz.tensor(dtypes=["float16"], min_dims=2, max_dims=3, min_side=1, max_side=12,
                           multiple_of=(-1, 4), contiguous=True, low=0.0, high=2.0, allow_specials=False),
            mpsfuzz.tensor(dtypes=["int32"], like=0)]
    mpsfuzz.kernel(reference=_double, inputs=decl, args={"alpha": [3, 5]})(lambda x, y, alpha: x)
    cases = example_cases(catalogue.get("<lambda>"), 60, seed=3)
    assert cases
    for case in cases:
        x, y = case.inputs
        assert 2 <= len(x.shape) <= 3 and x.shape[-1] % 4 == 0 and all(s >= 1 for s in x.shape)
        assert x.is_plain(), x.layout                      # contiguous=True: plain layouts only
        assert x.dtype == "float16" and y.dtype == "int32" and y.shape == x.shape
        assert x.values.specials == () and (x.values.low, x.values.high) == (0.0, 2.0)
        assert case.kwargs_dict()["alpha"] in (3, 5)
    assert any(not c.inputs[1].is_plain() for c in cases)  # the other input still gets awkward layouts


def test_the_reference_side_runs_the_reference_not_the_kernel(clean_registry):
    from mpsfuzz.execution.executor import run_reference

    @mpsfuzz.kernel(reference=_double, inputs=[mpsfuzz.tensor(min_dims=1)])
    def wrong_double(x):
        return x * 3

    spec = catalogue.get("wrong_double")
    case = example_cases(spec, 1, seed=0)[0]
    side, _ = run_reference(case, spec, {})
    torch.testing.assert_close(side.outputs, case.materialize("cpu")[0] * 2)


def test_a_kernel_file_registers_once_and_a_bad_one_is_a_one_line_error(tmp_path, clean_registry):
    good = tmp_path / "mine.py"
    good.write_text("import mpsfuzz\n@mpsfuzz.kernel(reference=lambda x: x, inputs=[mpsfuzz.tensor()])\n"
                    "def ident_kernel(x):\n    return x\n")
    assert kernels.load_file(good) == ("ident_kernel",)
    assert kernels.load_file(good) == ("ident_kernel",)          # once per process
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    for path, fragment in ((tmp_path / "missing.py", "no such file"), (empty, "declares no kernel"),
                           (broken, "importing it failed: SyntaxError")):
        with pytest.raises(kernels.KernelFileError) as info:
            kernels.load_file(path)
        assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_the_contiguity_check_tells_validating_kernels_from_silent_ones(tmp_path):
    from mpsfuzz.execution.kernel_checks import COPES, SILENTLY_WRONG, VALIDATES, check_contiguity
    from mpsfuzz.execution.targets import load_target

    decl = [mpsfuzz.tensor(dtypes=["float32"], min_dims=1, contiguous=True)]

    def strict(x):
        if not x.is_contiguous():
            raise ValueError("x must be contiguous")
        return x * 2

    def flat(x):
        return torch.as_strided(x, (x.numel(),), (1,), x.storage_offset()).view(x.shape) * 2

    def copes(x):
        return x.contiguous() * 2

    cpu = load_target("cpu")
    outcomes = {}
    for fn in (strict, flat, copes):
        spec = kernels.spec_of(fn, reference=_double, inputs=decl)
        (check,) = check_contiguity(spec, cpu)
        outcomes[fn.__name__] = check.outcome
        assert "\n" not in check.line()
    assert outcomes == {"strict": VALIDATES, "flat": SILENTLY_WRONG, "copes": COPES}


# -- which process runs a user's code ----------------------------------------------------------

# A kernel file that logs each process importing it (and calling its kernel), by the
# name multiprocessing gives the process: workers are "ForkServerProcess-N"; the zygote
# and the campaign's driver are "MainProcess".
LOGGING_KERNEL_FILE = """
import multiprocessing, os
import mpsfuzz

def _log(what):
    with open({log!r}, "a") as f:
        f.write(f"{{what}} {{multiprocessing.current_process().name}} {{os.getpid()}}\\n")

_log("import")

@mpsfuzz.kernel(reference=lambda x: x * 2, inputs=[mpsfuzz.tensor(dtypes=["float32"], min_dims=1, contiguous=True)])
def logged_double(x):
    _log("call")
    return x.contiguous() * 2

@mpsfuzz.kernel(reference=lambda x: x * 2, inputs=[mpsfuzz.tensor(dtypes=["float32"], min_dims=1, contiguous=True)])
def dies_on_gaps(x):
    if not x.is_contiguous():
        os._exit(3)
    return x * 2
"""


def _logged(log: Path) -> list[tuple[str, str, int]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [(what, name, int(pid)) for what, name, pid in (line.split() for line in lines)]


@pytest.mark.slow
def test_the_worker_zygote_never_imports_kernel_files_and_each_worker_does(tmp_path):
    # A user's file may touch the device when imported (torch.cuda.is_available(), import
    # triton); imported in the zygote, it left every forked worker unable to use CUDA.
    log = tmp_path / "imports.log"
    kfile = tmp_path / "mine.py"
    kfile.write_text(LOGGING_KERNEL_FILE.format(log=str(log)))
    script = """
import os, sys
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation import settings
settings.install(settings.GenerationSettings(kernel_files=(sys.argv[1],)))   # what a campaign's plan names
with WorkerPool("cpu") as pool:           # a forkserver zygote and one worker forked from it
    print("worker", pool._worker.process.pid)
import mpsfuzz.execution.preload          # what the zygote runs, here
from mpsfuzz.corpus.bugs import group as group_bugs
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.generation import catalogue, kernels
from mpsfuzz.generation.settings import KERNELS_ENV
print("deferred", "logged_double" in catalogue.all_ops())
kernels.resume_loading()                  # what each worker does after the fork
print("resumed", "logged_double" in catalogue.all_ops(), os.getpid())
"""
    env = dict(os.environ, MPSFUZZ_START_METHOD="forkserver")
    env.pop(KERNELS_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = subprocess.run([sys.executable, "-c", script, os.path.realpath(kfile)], env=env, text=True,
                            capture_output=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    worker_pid = int(out["worker"])
    assert out["deferred"] == "False"
    resumed, script_pid = out["resumed"].split()
    assert resumed == "True"
    # One import in the worker (at its start, before any case), one in this script after
    # resume_loading(), none in the zygote nor in the script while it played the zygote.
    assert _logged(log) == [("import", "ForkServerProcess-1", worker_pid), ("import", "MainProcess", int(script_pid))]


@pytest.mark.slow
def test_the_contiguity_check_runs_the_kernel_in_a_worker_and_survives_its_death(tmp_path):
    log = tmp_path / "calls.log"
    kfile = tmp_path / "mine.py"
    kfile.write_text(LOGGING_KERNEL_FILE.format(log=str(log)))
    result = mpsfuzz_cli("run", "--kernels", str(kfile), "--target", "cpu", "--max-cases", "6", "--jobs", "1",
                         "--seed", "1", "--no-progress", "--no-verify-repros", "--corpus", str(tmp_path / "c"),
                         cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "kernel `logged_double` requires input 0 contiguous; given a non-contiguous one it accepts it and " \
           "returns the reference's answer" in result.stdout, result.stdout[-3000:]
    assert "note: kernel `dies_on_gaps`: contiguity check failed: the worker running it died (exit code 3)" \
        in result.stdout, result.stdout[-3000:]
    calls = [(what, name) for what, name, _ in _logged(log)]
    # The driver imported the file (it lists the kernels) but never called a kernel.
    assert ("import", "MainProcess") in calls and ("call", "MainProcess") not in calls, calls
    assert any(what == "call" for what, _ in calls), calls
    assert all(name.startswith("ForkServerProcess-") for what, name in calls if what == "call"), calls


# -- campaigns on the examples ---------------------------------------------------------------

# file, kernel, what its finding must say (None: the correct form, no finding)
EXAMPLE_CAMPAIGNS = [
    ("contiguity.py", "scale_shift", None),
    ("contiguity.py", "scale_shift_buggy", "non-contiguous"),
    ("tail.py", "silu4", None),
    ("tail.py", "silu4_buggy", "tail"),
    ("empty.py", "rmsnorm", None),
    ("empty.py", "rmsnorm_buggy", "empty"),
    ("half_accumulation.py", "row_sum", None),
    ("half_accumulation.py", "row_sum_buggy", "dut-wrong"),
    ("overflow.py", "sum_all", None),
    ("overflow.py", "sum_all_buggy", "2^31 or more elements"),
]
# Files whose kernels need more than the default campaign: the 32-bit count shows past
# 2^31 elements, stride-0 views drawn with --large within --max-bytes (8 bytes an
# element); 30 cases (about a second each past 2^31 on CPU).
EXTRA_ARGS = {"overflow.py": ("--large", "--max-bytes", "32GB", "--max-cases", "30")}


# One buggy example by default (a user's kernel found, minimised and proved); the others
# and the correct ones with -m slow.
@pytest.mark.parametrize("file, op, trigger", [c if c[1] == "row_sum_buggy" else pytest.param(*c, marks=pytest.mark.slow)
                                               for c in EXAMPLE_CAMPAIGNS], ids=[c[1] for c in EXAMPLE_CAMPAIGNS])
def test_each_buggy_example_is_found_and_no_correct_one(file, op, trigger, tmp_path):
    corpus = tmp_path / "corpus"
    result = mpsfuzz_cli("run", "--kernels", str(EXAMPLES / file), "--ops", op, "--target", "cpu",
                         "--max-cases", "200", "--seed", "1", "--no-progress", "--corpus", str(corpus),
                         *EXTRA_ARGS.get(file, ()), cwd=tmp_path)
    found = [f for f in findings_in(corpus) if f["status"] == "new"]
    if trigger is None:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        assert findings_in(corpus) == [], [f["failure"]["title"] for f in findings_in(corpus)]
        return
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert found and all(f["case"]["op"] == op for f in found)
    assert all(f["repro"]["verified"] for f in found), [f["repro"]["detail"] for f in found]
    if trigger == "tail":
        # The divisibility probes name the kernel's width: rounding the last dim up to a
        # multiple of 4 passes (of 2 does not), and 4 more elements still fail.
        assert any("lastdim%4" in f["conditions"] and "is not a multiple of 4" in f["explanation"]
                   for f in found), [(f["conditions"], f["explanation"]) for f in found]
        # and the minimal case stays inside the declaration (min_dims=1: never 0-d)
        assert all(len(f["case"]["inputs"][0]["shape"]) >= 1 for f in found), [f["case"] for f in found]
    elif trigger == "dut-wrong":
        # The float64 arbiter blames the kernel: its float16 sums are beyond what one
        # rounding allows (no accumulation bound is granted: the kernel did not declare it).
        assert any("float64 arbiter: dut-wrong" in f["failure"]["message"] and f["case"]["inputs"][0]["dtype"]
                   in ("float16", "bfloat16") for f in found), [f["failure"]["message"][-300:] for f in found]
        # one bug, whatever the 16-bit dtype: the kernel is its own localisation, and a
        # dtype that passes by luck of its values is tried with fresh ones
        bugs = group_bugs([(Path(f["signature"]), Finding.from_json(f)) for f in found])
        assert len(bugs) == 1 and bugs[0].kernel == f"user::{op}", [(b.kernel, b.conditions) for b in bugs]
    else:
        assert any(trigger in f["explanation"] for f in found), [f["explanation"] for f in found]


@pytest.fixture
def contiguity_finding(tmp_path_factory, clean_registry) -> tuple[Path, dict]:
    """(a copy of contiguity.py, the finding of its buggy kernel on a gapped input): the
    file loaded and the case judged on the cpu target in this process, the finding's repro
    script generated and verified in a fresh interpreter as a campaign's are. (A campaign
    finds the kernel's bugs in the slow test below and row_sum_buggy's by default.)"""
    from mpsfuzz.execution.targets import load_target
    from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe
    from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
    from mpsfuzz.oracles.judge import judge_case
    from mpsfuzz.reports.repro import repro_for

    kfile = tmp_path_factory.mktemp("contiguity") / "contiguity.py"
    kfile.write_text((EXAMPLES / "contiguity.py").read_text())
    assert kernels.load_file(kfile) == ("scale_shift", "scale_shift_buggy")
    case = Case("scale_shift_buggy", (TensorRecipe((2,), "float32", Layout(gaps=(2,))),), (("alpha", 2.0),))
    outcome = judge_case(case, load_target("cpu"), worker_oracles(DEFAULT))
    (failure,) = [Failure.from_json(f) for f in outcome.failures if f["oracle"] == "values"]
    finding = Finding.create(case, failure, target_name="cpu", target_spec="cpu", device="cpu")
    finding.repro = repro_for(finding, verify=True)
    return kfile, finding.to_json()


@pytest.fixture(scope="module")
def contiguity_run(tmp_path_factory) -> tuple[Path, Path]:
    """(a copy of contiguity.py, the corpus of a campaign on its buggy kernel)."""
    work = tmp_path_factory.mktemp("contiguity")
    (work / "src").mkdir()
    kfile = work / "src" / "contiguity.py"
    kfile.write_text((EXAMPLES / "contiguity.py").read_text())
    corpus = work / "corpus"
    mpsfuzz_cli("run", "--kernels", str(kfile), "--ops", "scale_shift_buggy", "--target", "cpu",
                "--max-cases", "100", "--seed", "1", "--no-progress", "--corpus", str(corpus), cwd=work)
    return kfile, corpus


def test_a_kernel_repro_script_carries_the_kernel_file_and_reproduces_without_it(contiguity_finding, tmp_path):
    kfile, finding = contiguity_finding
    values = [f for f in [finding] if f["failure"]["oracle"] == "values"]
    assert values and values[0]["repro"]["verified"], [f["repro"] for f in values]
    script = values[0]["repro"]["script"]
    assert "kernels.scale_shift_reference(" in script and "kernels.scale_shift_buggy(" in script
    assert "def _scale_shift_buggy(x: torch.Tensor, alpha: float)" in script     # the file's text, inlined
    # The file gone, the script run in a fresh interpreter where `import mpsfuzz` fails (a
    # module of that name beside the script comes first): it still shows the bug.
    away = tmp_path / "away.py"
    kfile.rename(away)
    try:
        (tmp_path / "repro.py").write_text(script)
        (tmp_path / "mpsfuzz.py").write_text("raise ImportError('the repro script imported mpsfuzz')\n")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=120)
    finally:
        away.rename(kfile)
    assert done.returncode == 1 and "AssertionError" in done.stderr, done.stdout[-2000:] + done.stderr[-3000:]
    assert "imported mpsfuzz" not in done.stderr


@pytest.mark.slow
def test_a_kernel_finding_s_issue_draft_is_addressed_to_the_kernel_s_author(contiguity_run, tmp_path):
    kfile, corpus = contiguity_run
    done = mpsfuzz_cli("report", "--format", "issue", "--no-verify", "--kernels", str(kfile), str(corpus),
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    # one draft per bug: the wrong values of a strided view, and (for an expanded view,
    # read past its storage) the error; the values one is here, addressed to the author
    assert ("# [cpu] Your kernel `scale_shift_buggy` (contiguity.py) returns wrong values when "
            "`input` is non-contiguous") in text, [line for line in text.splitlines() if line.startswith("# ")]
    assert text.startswith("# [cpu] Your kernel `scale_shift_buggy` (contiguity.py) "), text[:300]
    assert f"Your kernel `scale_shift_buggy` (in `{kfile}`) does not do what its reference does" in text
    assert "for the author of the kernel `scale_shift_buggy`" in text and "not about PyTorch" in text
    assert "the kernel's reference, `scale_shift_reference`, returns for the same input" in text
    assert "Suggested labels" not in text and "`module: " not in text     # PyTorch's triage labels: not here


@pytest.mark.slow
def test_kernels_alone_selects_the_files_kernels_and_notes_the_contiguity_contract(tmp_path):
    result = mpsfuzz_cli("run", "--kernels", str(EXAMPLES / "tail.py"), "--target", "cpu", "--max-cases", "20",
                         "--seed", "1", "--no-progress", "--no-verify-repros", "--corpus", str(tmp_path / "c"),
                         cwd=tmp_path)
    assert "2 op(s)" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    assert "kernel `silu4` requires input 0 contiguous; given a non-contiguous one it rejects it" in result.stdout
    assert "kernel `silu4_buggy` requires input 0 contiguous; given a non-contiguous one it accepts it " \
           "silently and returns WRONG values" in result.stdout


@pytest.mark.parametrize("content, fragment", [
    (None, "no such file"),
    ("def f(:\n", "importing it failed: SyntaxError"),
    ("import torch\n", "declares no kernel"),
])
def test_a_bad_kernels_file_is_a_one_line_usage_error(content, fragment, tmp_path):
    path = tmp_path / "kernels.py"
    if content is not None:
        path.write_text(content)
    result = mpsfuzz_cli("run", "--kernels", str(path), "--target", "cpu", "--max-cases", "5",
                         "--corpus", str(tmp_path / "c"), cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpsfuzz: error: --kernels") and fragment in lines[0], lines
    assert "Traceback" not in result.stderr
