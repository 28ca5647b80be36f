"""Each catalogued mistake, written as a small variant of the reference, fails its problem only."""
from __future__ import annotations

import pytest

from conftest import SOLUTIONS, grade_shared, make_impl
from together import Together, selected
from attnkit.grading import costly
from attnkit.diagnose.mistakes import wrong_source
from attnkit.problems import all_problems, get, unavailable
from attnkit.report.feedback import problem_text

CASES = [(p, m) for p in all_problems() for m in p.mistakes]
SAMPLED = [pytest.param(p, m, marks=[pytest.mark.skipif(bool(unavailable(p)), reason=f"{p.id}: {unavailable(p)}")]
                        + ([] if i % 24 == 0 and not costly(p) else [pytest.mark.slow]),
                        id=f"{p.id}-{m.id}")
           for p in all_problems() for i, m in enumerate(p.mistakes)]
"""Every twenty-fourth catalogued mistake of each problem (the first included; none of the costly problems, whose kernels the
interpreter runs: a minute each on two cores) in the README's command; the others in `pytest tests -m slow`, which CI
runs too (every one is graded either way; the README's command stays within its time budget)."""


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """(problem, mistake) -> the report of that mistake, graded once for every test here: the problem and those that
    import it, which get a correct private copy of it (only the problem under test carries the mistake). The mistakes
    of unrelated problems share grading runs (tests/together.py), the selected tests' next ones first. The expected
    values and the catalogued mistakes' answers on the same seeded calls depend on the problem alone: the session's
    store serves every submission graded here (conftest.grade_shared)."""
    runs = Together(tmp_path_factory.mktemp, dependents=True)

    def add(problem, mistake):
        runs.add((problem.id, mistake.id), problem.id, wrong_source(problem, mistake))

    for problem, mistake in selected(request, "problem", "mistake"):
        add(problem, mistake)
    for (problem,) in selected(request, "problem", test="test_every_check_fails_some_catalogued_mistake"):
        for mistake in problem.mistakes:
            add(problem, mistake)

    def report(problem, mistake):
        add(problem, mistake)
        return runs.report((problem.id, mistake.id))

    return report


@pytest.mark.parametrize("problem", all_problems(), ids=lambda p: p.id)
def test_at_least_six_mistakes_per_problem(problem):
    assert len(problem.mistakes) >= (8 if problem.track == "LLM" else 6)  # the LLM track's issue asks for 8
    assert len({m.id for m in problem.mistakes}) == len(problem.mistakes)


@pytest.mark.parametrize("problem,mistake", SAMPLED)
def test_mistake_fails_its_problem_and_only_that_problem(graded, problem, mistake):
    # the problem and those that import it: no other module can see the mistake (it lives in this file alone)
    report = graded(problem, mistake)
    assert report.grader_errors == 0
    statuses = {p.id: p.status for p in report.problems}
    assert statuses.pop(problem.id) == "failed"
    assert set(statuses.values()) <= {"passed"}, statuses
    failing = [c for c in report.problem(problem.id).checks if c.status == "failed"]
    source_read = ("parameters", "value_errors", "no_torch", "capabilities")  # checks whose message names no call
    assert failing and all(c.message.startswith("called ") or c.id in source_read for c in failing)
    # named correctly: by at least one failing check, and never misnamed by another
    named = {c.id: c.mistake for c in failing}
    assert mistake.id in named.values(), named
    assert set(named.values()) <= {mistake.id, None}, named
    text = problem_text(report.problem(problem.id))  # the block is said once per problem, over its checks
    assert f"Recognised mistake [{mistake.id}]: {mistake.name}" in text
    assert mistake.explain in text and mistake.hint in text


def test_every_mistake_is_explained():
    for p, m in CASES:
        assert m.name and m.explain and m.hint, (p.id, m.id)


def test_the_mistake_of_an_imported_masked_softmax_is_named_in_the_module(tmp_path):
    problem = get("masked_softmax")
    wrong = wrong_source(problem, next(m for m in problem.mistakes if m.id == "fill_zero"))
    report = grade_shared(make_impl(tmp_path, {"masked_softmax.py": wrong}))
    for pid in ("additive_attention", "luong_attention", "multihead_additive_attention", "chunked_additive_attention"):
        named = {c.mistake for c in report.problem(pid).checks if c.status == "failed"}
        assert named == {"masked_softmax:fill_zero"}, (pid, named)


def test_two_mistakes_at_once_are_not_guessed(tmp_path):
    problem = next(p for p in all_problems() if p.id == "additive_attention")
    first, second = (next(m for m in problem.mistakes if m.id == i) for i in ("no_tanh", "extra_bias"))
    from attnkit.diagnose.mistakes import apply

    source = apply(wrong_source(problem, first), second)
    report = grade_shared(make_impl(tmp_path, {"additive_attention.py": source}), ["additive_attention"])
    failing = [c for c in report.problems[0].checks if c.status == "failed"]
    assert failing
    for c in failing:
        assert c.mistake in (None, "no_tanh", "extra_bias")
        if c.mistake is None:  # said once, for the problem
            assert "No catalogued mistake reproduces these results" in "\n".join(report.problems[0].unexplained)


def test_a_failing_prerequisite_is_named(tmp_path):
    problem = get("masked_softmax")
    wrong = wrong_source(problem, next(m for m in problem.mistakes if m.id == "lens_ignored"))
    report = grade_shared(make_impl(tmp_path, {"masked_softmax.py": wrong}))
    check = next(c for c in report.problem("additive_attention").checks if c.status == "failed")
    assert "imports your masked_softmax, which fails its own checks" in check.message


def test_a_failing_prerequisite_is_blamed_only_where_the_module_imports_it(tmp_path):
    """The same wrong masked_softmax and the same mistake in additive_attention: where additive_attention imports the
    learner's masked_softmax, its failures point there (and that mistake may be named); where it defines its own
    softmax, nothing sends the learner to a file their code does not use."""
    softmax, additive = get("masked_softmax"), get("additive_attention")
    wrong_softmax = wrong_source(softmax, next(m for m in softmax.mistakes if m.id == "lens_ignored"))
    wrong_additive = wrong_source(additive, next(m for m in additive.mistakes if m.id == "no_tanh"))
    importing = "from .masked_softmax import masked_softmax\n"
    assert importing in wrong_additive
    own = wrong_additive.replace(importing, "") + "\n\n" + (SOLUTIONS / "masked_softmax.py").read_text()
    for source, blamed in ((wrong_additive, True), (own, False)):
        impl = make_impl(tmp_path / str(blamed), {"masked_softmax.py": wrong_softmax, "additive_attention.py": source})
        result = grade_shared(impl, ["additive_attention"]).problem("additive_attention")
        failed = [c for c in result.checks if c.status == "failed"]
        assert failed and all(("imports your masked_softmax" in c.message) == blamed for c in failed), blamed
        assert blamed or not any((c.mistake or "").startswith("masked_softmax:") for c in failed)


def test_a_mistake_on_one_code_path_is_still_named(tmp_path):
    """The wrong axis only where valid_lens is None: the variant reproduces every wrong call."""
    source = (SOLUTIONS / "masked_softmax.py").read_text().replace("dim=-1)\n    lens", "dim=1)\n    lens")
    report = grade_shared(make_impl(tmp_path, {"masked_softmax.py": source}), ["masked_softmax"])
    named = {c.id: c.mistake for c in report.problems[0].checks if c.status == "failed"}
    assert named and set(named.values()) == {"wrong_axis"}, named


def test_a_denominator_too_large_by_more_than_an_epsilon_is_not_named_epsilon(tmp_path):
    """A chunk's keys counted twice in the denominator only (the numerator right): every row is right up to a factor
    below 1, as with an epsilon, but by far more than an epsilon shrinks a row; the evidence says what the rows show."""
    from attnkit.problems.linear_attention import DEN

    source = (SOLUTIONS / "linear_attention.py").read_text()
    assert DEN in source
    wrong = source.replace(DEN, "den = qc @ (z + kc.sum(-2))[..., None] + a.sum(-1, keepdim=True)")
    report = grade_shared(make_impl(tmp_path, {"linear_attention.py": wrong}), ["linear_attention"])
    failing = [c for c in report.problem("linear_attention").checks if c.status == "failed"]
    assert failing and all(c.mistake is None for c in failing), {c.id: c.mistake for c in failing}
    text = problem_text(report.problem("linear_attention"))
    assert "the row's denominator is too large, by more than an epsilon would make it" in text, text


def test_a_factor_the_wrong_calls_share_by_chance_is_not_evidence(tmp_path):
    """A partial last block dropped: the wrong calls happen to have int64 block tables, as most calls do (the int32
    ones are few); that is no evidence, and the results say nothing of the index dtype."""
    source = (SOLUTIONS / "paged_attention.py").read_text()
    right = "block_tables[b, :(n + block_size - 1) // block_size]"
    assert right in source
    wrong = source.replace(right, "block_tables[b, :max(n // block_size, 1)]")
    report = grade_shared(make_impl(tmp_path, {"paged_attention.py": wrong}), ["paged_attention"])
    assert report.problem("paged_attention").status == "failed"
    text = problem_text(report.problem("paged_attention"))
    assert "index=" not in text.split("paged_attention::")[0], text


def test_error_shape_names_nan_rows_in_a_different_style(tmp_path):
    """-inf fill with no guard, written with torch.where and a loop-free mask (not the catalogue's patch)."""
    source = (
        "import torch\n\n"
        "def masked_softmax(scores, valid_lens=None):\n"
        "    if valid_lens is None:\n"
        "        return scores.softmax(-1)\n"
        "    lens = valid_lens.reshape(valid_lens.shape[0], -1, 1)\n"
        "    keep = torch.arange(scores.shape[-1]) < lens\n"
        "    return torch.where(keep, scores, torch.tensor(float('-inf'), dtype=scores.dtype)).softmax(-1)\n"
    )
    report = grade_shared(make_impl(tmp_path, {"masked_softmax.py": source}), ["masked_softmax"])
    named = {c.id: c.mistake for c in report.problems[0].checks if c.status == "failed"}
    assert named.get("weight_sums") == "nan_rows", named


@pytest.mark.parametrize("tail,sentence", [
    ("return torch.softmax(filled, dim=-1) * keep + 0.01 * (~keep & keep.any(-1, keepdim=True))",
     "Only masked keys differ, and valid keys are right"),
    ("return torch.where(keep.any(-1, keepdim=True), torch.softmax(filled, dim=-1) * keep, 0.5)",
     "Only rows with no allowed key differ"),
])
def test_the_shape_of_the_error_is_described(tmp_path, tail, sentence):
    source = (SOLUTIONS / "masked_softmax.py").read_text().replace("return torch.softmax(filled, dim=-1) * keep", tail)
    report = grade_shared(make_impl(tmp_path, {"masked_softmax.py": source}), ["masked_softmax"])
    parity = next(c for c in report.problems[0].checks if c.id == "parity_float64")
    assert parity.status == "failed" and sentence in parity.message


@pytest.mark.slow  # grades every catalogued mistake of every problem: the slow suite's (the README's samples a third)
@pytest.mark.parametrize("problem", [pytest.param(p, marks=pytest.mark.skipif(bool(unavailable(p)), reason="not "
                                                  "installed")) for p in all_problems()], ids=lambda p: p.id)
def test_every_check_fails_some_catalogued_mistake(graded, problem):
    """No check that can never fail: each CPU check of the problem catches at least one mistake."""
    caught = set()
    for mistake in problem.mistakes:
        caught |= {c.id for c in graded(problem, mistake).problem(problem.id).checks if c.status == "failed"}
    # capabilities reads the source for escape hatches, which no catalogued mistake (a wrong formula) uses: the
    # submissions that fail it are in tests/test_static_scan.py and tests/test_outside_rules.py
    # onchip compiles the kernels for a GPU, which no catalogued mistake (a wrong kernel) changes: the kernels that
    # fail it are in tests/test_kernels.py
    cpu = {c for c in problem.points if not c.startswith("cuda") and c not in ("capabilities", "onchip")}
    assert cpu - caught == set(), f"never failed: {sorted(cpu - caught)}"


@pytest.mark.parametrize("pid,mid", [("alibi_attention", "queries_scaled_in_place"),
                                     ("linear_attention", "step_state_in_place")])
def test_a_mistake_that_writes_into_its_inputs_is_named(tmp_path, pid, mid):
    """The learner's side effects are decided by the grader (digests of the inputs after each call, compared with what
    it sent), a catalogued variant's by its own run in the grader's process: both must see the write for the variant
    to reproduce the learner's results (a variant that reported no side effect would explain nothing)."""
    problem = get(pid)
    mistake = next(m for m in problem.mistakes if m.id == mid)
    report = grade_shared(make_impl(tmp_path, {f"{pid}.py": wrong_source(problem, mistake)}), [pid])
    failing = {c.id: c.mistake for c in report.problem(pid).checks if c.status == "failed"}
    assert "side_effects" in failing and mid in failing.values(), failing
