"""Grouping findings into bugs (corpus/bugs.py): one kernel with matching conditions is
one bug whatever the public op, variant or oracle; two causes on one kernel, two kernels,
two device kinds or two symptom classes stay apart; what is not localised stands alone."""
from __future__ import annotations

from pathlib import Path

from mpsfuzz.corpus.bugs import covers, group, normalised_conditions
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.generation.recipes import Case, TensorRecipe
from mpsfuzz.oracles import Failure


def finding(op="mm", oracle="values", kind="wrong-values", *, conditions=(), kernel="aten::mm.default",
            divergence="wrong-values", status="kernel", variant="functional", device="mps", flaky=False,
            blame="target", form="functional", message=None) -> Finding:
    case = Case(op, (TensorRecipe((2, 2), "float32"), TensorRecipe((2, 2), "float32")), variant=variant)
    failure = Failure(oracle=oracle, kind=kind, severity="high", title=f"`{op}` {kind}", message=kind,
                      dedup_key=(kind,) if message is None else (kind, "RuntimeError", message), blame=blame)
    loc = {"status": status, "kernel": kernel, "form": form, "divergence": divergence, "kinds": [divergence],
           "repro": {"script": f"# {kernel}\n", "expect": {"outcome": "assertion"}, "lines": 1}}
    if status != "kernel":
        loc = {"status": status, "reason": "no single aten call diverges"}
    found = Finding.create(case, failure, target_name=device, target_spec=device, device=device, flaky=flaky,
                           conditions=conditions, explanation={"text": f"needs {', '.join(conditions or ()) or 'nothing'}"},
                           localisation=loc)
    found.repro = {"script": "# repro\n", "verified": True}   # new means verified
    return found


def bugs_of(*findings):
    return group([(Path(f"{i}-{f.op}-{f.oracle}.json"), f) for i, f in enumerate(findings)])


def test_two_public_ops_over_one_kernel_are_one_bug():
    bugs = bugs_of(finding("mm", conditions=("empty",)),
                   finding("matmul", conditions=("empty", "layout:1")),
                   finding("matmul", "grads", "wrong-grads", conditions=("empty", "variant:grad", "classes:float"),
                           variant="grad"))
    assert len(bugs) == 1
    bug = bugs[0]
    assert bug.kernel == "aten::mm.default" and bug.ops == {"matmul": ["functional", "grad"], "mm": ["functional"]}
    assert bug.oracles == ["grads", "values"] and len(bug.findings) == 3
    assert bug.general.op == "mm" and bug.explanation == "needs empty"  # the most general finding's
    assert bug.kernel_repro["script"] == "# aten::mm.default\n"
    data = bug.to_json()
    assert data["kernel"] == "aten::mm.default" and len(data["findings"]) == 3
    assert {f["path"] for f in data["findings"]} == {"0-mm-values.json", "1-matmul-values.json",
                                                      "2-matmul-grads.json"}


def test_wrong_values_and_an_overwritten_input_are_one_bug():
    """The eig case: the values oracle sees wrong values, the variants oracle the input
    overwritten; one call does both."""
    bugs = bugs_of(finding("linalg.eig", conditions=("layout:0",), kernel="aten::linalg_eig.default"),
                   finding("linalg.eig", "variants", "input-modified", conditions=("layout:0",),
                           kernel="aten::linalg_eig.out", form="out", divergence="writes-input", variant="out"),
                   finding("linalg.eigvals", conditions=("layout:0",), kernel="aten::linalg_eig.default"))
    assert len(bugs) == 1 and bugs[0].oracles == ["values", "variants"]
    assert bugs[0].ops == {"linalg.eig": ["functional", "out"], "linalg.eigvals": ["functional"]}
    assert bugs[0].kernels == ["aten::linalg_eig.default", "aten::linalg_eig.out"]


def test_an_out_only_bug_stays_apart_from_a_functional_one():
    bugs = bugs_of(finding("add", conditions=("dtypes:float16",), kernel="aten::add.Tensor"),
                   finding("add", conditions=("variant:out-strided",), kernel="aten::add.out", form="out",
                           variant="out-strided"),
                   finding("sub", conditions=("layout:0", "variant:inplace"), kernel="aten::sub_.Tensor",
                           form="inplace", variant="inplace"),
                   finding("sub", conditions=("variant:out-resized",), kernel="aten::sub.out", form="out",
                           variant="out-resized"))
    assert len(bugs) == 4


def test_two_causes_on_one_kernel_stay_two_bugs():
    bugs = bugs_of(finding("sigmoid", conditions=("layout:0",), kernel="aten::sigmoid.default"),
                   finding("sigmoid", conditions=("dtypes:float16",), kernel="aten::sigmoid.default"))
    assert len(bugs) == 2


def test_sibling_kernels_with_matching_conditions_are_one_bug_and_others_stay_apart():
    """Issue 37: a fault of the bitwise ops' shared kernel (non-contiguous inputs) was
    filed as three bugs, one per op. Kernels that backends implement as one are one bug
    where their conditions cover one another; two unary ops with the same conditions are
    not siblings, and siblings with other conditions stay apart."""
    gapped = dict(conditions=("layout:0",))
    bugs = bugs_of(finding("bitwise_and", kernel="aten::bitwise_and.Tensor", **gapped),
                   finding("bitwise_or", kernel="aten::bitwise_or.Tensor", **gapped),
                   finding("bitwise_xor", kernel="aten::bitwise_xor.Tensor", **gapped),
                   finding("triu", kernel="aten::triu.default", conditions=("rank>=4",)),
                   finding("tril", kernel="aten::tril.default", conditions=("rank>=4",)))
    assert sorted(len(b.findings) for b in bugs) == [2, 3]
    assert {b.ops.keys() == {"bitwise_and", "bitwise_or", "bitwise_xor"} for b in bugs} == {True, False}
    assert len(bugs_of(finding("neg", kernel="aten::neg.default", **gapped),
                       finding("exp", kernel="aten::exp.default", **gapped))) == 2
    assert len(bugs_of(finding("triu", kernel="aten::triu.default", conditions=("rank>=4",)),
                       finding("tril", kernel="aten::tril.default", conditions=("empty",)))) == 2


def test_one_check_refusing_valid_input_is_one_bug_whatever_the_sizes_that_reach_it():
    """Issue 31 (H200): CUDA avg_pool2d's "integer out of range" past 2^31 elements and past a
    batch of 65,536 with padding; ablation words the sizes differently, one check fired."""
    refusal = dict(oracle="errors", kind="dut-raises", kernel="aten::avg_pool2d.default", device="cuda",
                   divergence="raises-on-device")
    bugs = bugs_of(finding("avg_pool1d@huge", conditions=("numel>=2147483648",), message="integer out of range",
                           **refusal),
                   finding("avg_pool1d@huge", conditions=("side>=65536", "kwarg:padding"),
                           message="integer out of range", **refusal),
                   finding("avg_pool2d@huge", conditions=("numel>=2147483648",), message="integer out of range",
                           **refusal))
    assert len(bugs) == 1 and len(bugs[0].findings) == 3
    # two checks (bgemm's batch count, its leading dimension) with incomparable conditions
    bmm = dict(refusal, kernel="aten::bmm.default")
    assert len(bugs_of(finding("bmm", conditions=("numel>=2147483648",), message="argument num_batches must be < N",
                               **bmm),
                       finding("bmm", conditions=("layout:1",), message="argument lda must be < N", **bmm))) == 2
    # a device fault's message names no check: incomparable conditions stay two bugs
    fault = dict(refusal, kind="device-fault")
    assert len(bugs_of(finding(conditions=("empty",), message="CUDA error: invalid argument", **fault),
                       finding(conditions=("side>=65536",), message="CUDA error: invalid argument", **fault))) == 2


def test_other_kernels_devices_blames_and_symptom_classes_stay_apart():
    base = dict(conditions=("empty",))
    bugs = bugs_of(finding(**base),
                   finding(kernel="aten::bmm.default", **base),                 # another kernel
                   finding(device="cuda", **base),                              # another device kind
                   finding(blame="cpu", **base),                                # the CPU reference is wrong
                   finding("mm", "errors", "dut-raises", divergence="raises-on-device", **base),
                   finding("mm", "crash", "crash", divergence="crash", **base))
    assert len(bugs) == 6
    assert len(bugs_of(finding(device="cuda:0", **base), finding(device="cuda:1", **base))) == 1


def test_unlocalised_findings_are_bugs_of_their_op():
    bugs = bugs_of(finding(status="composite", conditions=("empty",)),
                   finding("matmul", status="composite", conditions=("empty",)),
                   finding(status="not-localised", conditions=()),          # mm on any input: covers mm's first
                   finding("matmul", flaky=True),
                   finding("bmm", conditions=None))                     # not explained
    assert len(bugs) == 4 and all(b.kernel is None and b.reason for b in bugs)
    (mm,) = [b for b in bugs if b.ops == {"mm": ["functional"]}]
    assert len(mm.findings) == 2 and mm.general.conditions == ()
    assert any(b.reason.startswith("composite") for b in bugs) and any("flaky" in b.reason for b in bugs)
    # one finding read from two corpora is one bug
    same = finding(status="composite")
    assert len(group([(Path("a/x.json"), same), (Path("b/x.json"), same)])) == 1


def test_findings_that_differ_only_in_which_argument_triggers_them_are_one_bug():
    """Issue 30: gru with a gapped w_ih and with a gapped w_hh (cuDNN, no CPU twin: not
    localised) were two findings and two bugs; addbmm_ with `a` or `b` sharing `c`'s
    storage, and addmm_ and addmm(out=c), likewise."""
    def raises(op, conditions, variant="functional"):
        f = finding(op, "errors", "dut-raises", conditions=conditions, status="not-localised", variant=variant)
        f.failure = Failure(oracle="errors", kind="dut-raises", severity="high", title="raises", message="m",
                            dedup_key=("dut-raises", "RuntimeError", "view size is not compatible"))
        return f
    gru = bugs_of(raises("gru", ("layout:2",)), raises("gru", ("layout:3",)))
    assert len(gru) == 1 and len(gru[0].findings) == 2
    assert "differ only in which argument" in gru[0].reason
    addbmm = bugs_of(raises("addbmm", ("alias:1", "variant:inplace"), "inplace"),
                     raises("addbmm", ("alias:2", "variant:inplace"), "inplace"))
    assert len(addbmm) == 1
    addmm = bugs_of(raises("addmm", ("layout:0", "variant:inplace"), "inplace"),
                    raises("addmm", ("layout:0", "variant:out-alias", "alias:out"), "out-alias"))
    assert len(addmm) == 1 and addmm[0].ops == {"addmm": ["inplace", "out-alias"]}
    # Another symptom, another op, or conditions neither covers: apart.
    assert len(bugs_of(raises("gru", ("layout:2",)), raises("lstm", ("layout:2",)))) == 2
    assert len(bugs_of(raises("gru", ("layout:2",)), raises("gru", ("empty",)))) == 2
    other = raises("gru", ("layout:3",))
    other.failure = Failure(oracle="errors", kind="dut-raises", severity="high", title="raises", message="m",
                            dedup_key=("dut-raises", "RuntimeError", "another message"))
    assert len(bugs_of(raises("gru", ("layout:2",)), other)) == 2


def test_a_bug_has_the_most_urgent_status_and_a_stable_id():
    fixed = finding(conditions=("empty",))
    fixed.history = [{"result": "fixed", "date": "2025-01-01", "torch_version": "2.9"}]
    new = finding("matmul", conditions=("empty",))
    assert fixed.status == "fixed"
    (bug,) = bugs_of(fixed, new)
    assert bug.status == "new"
    (again,) = bugs_of(new, fixed)
    assert again.id == bug.id and len(bug.id) == 12


def test_condition_normalisation_and_cover():
    assert normalised_conditions(("layout:1", "0-d:0", "rank>=5", "variant:out", "kwarg:alpha", "empty",
                                  "dtypes:float16")) == {"layout", "0-d", "rank", "empty", "dtypes:float16"}
    assert normalised_conditions(("variant:out-strided",), "out") == {"form:out"}
    from mpsfuzz.triage.kernel_call import kernel_family
    assert {kernel_family(k) for k in ("aten::add.Tensor", "aten::add_.Tensor", "aten::add.out")} == {"aten::add"}
    assert kernel_family("aten::__and__.Tensor") == "aten::__and__"
    assert kernel_family("aten::_softmax.default") == "aten::_softmax"
    n = normalised_conditions
    assert covers(n(("empty",)), n(("empty", "layout:0")))
    assert not covers(n(("empty", "layout:0")), n(("empty",)))
    # dtype restrictions compare as sets: float16+bfloat16 covers float16
    assert covers(n(("dtypes:bfloat16+float16",)), n(("dtypes:float16",)))
    assert not covers(n(("dtypes:float16",)), n(("dtypes:bfloat16+float16",)))
    assert not covers(n(("dtypes:float16",)), n(("layout:0",)))
    assert covers(n(()), n(("classes:float",)))


def test_localisation_round_trips_and_old_files_load_without_it():
    f = finding(conditions=("empty",))
    data = f.to_json()
    assert data["format"] == 3 and Finding.from_json(data).localisation == f.localisation
    del data["localisation"]
    old = Finding.from_json(data)
    assert old.localisation is None
    (bug,) = bugs_of(old)
    assert bug.kernel is None and "before localisation" in bug.reason


def test_an_ops_large_class_is_the_op_for_grouping():
    """bmm@large is bmm: a bug seen at both sizes under the same conditions is one bug;
    one that needs the size (side>=65536) is a bug of its own."""
    both = bugs_of(finding("bmm", conditions=("layout:0",), status="not-localised"),
                   finding("bmm@large", conditions=("layout:0",), status="not-localised"))
    assert len(both) == 1 and both[0].ops.keys() == {"bmm", "bmm@large"}
    apart = bugs_of(finding("bmm", conditions=("layout:0",), status="not-localised"),
                    finding("bmm@large", conditions=("side>=65536",), status="not-localised"))
    assert len(apart) == 2


def test_the_run_summary_counts_bugs_as_the_corpus_list_groups_them():
    """Issue 30 (H200): the summary said 17 new bugs where `corpus list --by bug` showed 16:
    it grouped the new findings alone, and two of them join through a third that is
    `unverified`. The summary groups every finding the run reported."""
    import io

    from rich.console import Console

    from mpsfuzz.events import CampaignFinished, Stats
    from mpsfuzz.reports.console import ConsoleReporter
    a = finding("sdpa", conditions=("layout:0",), kernel="aten::_efficient_attention.default")
    b = finding("sdpa", conditions=("dtypes:float16",), kernel="aten::_efficient_attention.default")
    c = finding("sdpa", conditions=(), kernel="aten::_efficient_attention.default")
    c.repro = {"script": "# repro\n"}     # not run to the end
    assert (a.status, b.status, c.status) == ("new", "new", "unverified")
    assert len(bugs_of(a, b)) == 2 and len(bugs_of(a, b, c)) == 1
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=200), live=False)
    reporter.summary(CampaignFinished(Stats(), tuple((f, Path(f"{i}.json"), True) for i, f in enumerate((a, b, c))),
                                      "budget"))
    assert "1 new bug(s) (2 finding(s))" in out.getvalue(), out.getvalue()
    assert "unverified bug(s)" not in out.getvalue()


def test_eager_cpus_bug_found_testing_two_devices_is_one_bug_of_cpu():
    """Issue 37: eager CPU's wrong kernel is one bug whether testing CUDA or MPS met it
    (filed once, to CPU); the targets' own bugs on two devices stay two."""
    base = dict(conditions=("empty",), oracle="arbiter", kind="cpu-wrong")
    bugs = bugs_of(finding(device="cuda", blame="cpu", **base), finding(device="mps", blame="cpu", **base))
    assert len(bugs) == 1 and bugs[0].device == "cpu" and len(bugs[0].findings) == 2
    targets = bugs_of(finding(device="cuda", conditions=("empty",)), finding(device="mps", conditions=("empty",)))
    assert len(targets) == 2
    unlocalised = dict(base, status="composite")
    assert len(bugs_of(finding(device="cuda", blame="cpu", **unlocalised),
                       finding(device="mps", blame="cpu", **unlocalised))) == 1
