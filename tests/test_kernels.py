"""The kernels stage (section 22): a Triton kernel graded on a machine with no GPU, through Triton's interpreter.

The reference passes; a kernel that writes its scores to global memory, reloads its query tile or skips no causal
block fails the traffic check alone, with the counts; an unmasked load of a partial block fails the bounds check,
naming the argument it ran past; a launcher that computes in torch fails the traffic check; tiles too large for sm_80
fail the on-chip check with both numbers; and without Triton the stage says what to install."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnkit.problems import get, unavailable
from attnkit.run.kernels import interpreting, unwritten, watching
from conftest import ROOT, SOLUTIONS, grade_shared, make_impl

PID = "triton_flash_attention"
if unavailable(get(PID)) is not None and os.environ.get("ATTNKIT_REQUIRE_TRITON") == "1":  # CI sets it: a skip there
    raise RuntimeError(f"ATTNKIT_REQUIRE_TRITON=1, and {PID}: {unavailable(get(PID))}")  # would hide a broken install
pytestmark = pytest.mark.skipif(unavailable(get(PID)) is not None, reason="Triton is not installed (.[kernels])")
SOURCE = (SOLUTIONS / f"{PID}.py").read_text()


def _patched(mistake_id: str) -> str:
    text = SOURCE
    for old, new in next(m for m in get(PID).mistakes if m.id == mistake_id).patch:
        assert text.count(old) == 1
        text = text.replace(old, new)
    return text


def _compiling() -> bool | None:
    """The sandbox in which the on-chip check can compile here: this process's default where a worker can start Python,
    else bubblewrap (which binds it); a test of the on-chip check is skipped where neither can."""
    from attnkit.run.jail import unusable
    from attnkit.run.kernel_compile import unreachable

    if unreachable(False) is None:
        return None
    if unusable() is None:
        return True
    pytest.skip("no sandbox here can compile a kernel: " + unreachable(False))


def _graded(tmp_path, source: str, sandbox=None):
    report = grade_shared(make_impl(tmp_path, {f"{PID}.py": source}, base=None), [PID], sandbox=sandbox)
    assert report.grader_errors == 0
    return report.problem(PID)


def _failing(result) -> dict:
    return {c.id: c for c in result.checks if c.status == "failed"}


def test_the_reference_gets_full_marks():
    result = grade_shared(SOLUTIONS, [PID], sandbox=_compiling()).problem(PID)
    assert result.status == "passed" and result.score == result.max_score == get(PID).max_points


def _reference_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tfa_ref_for_counts", SOLUTIONS / f"{PID}.py")
    module = importlib.util.module_from_spec(spec)
    with interpreting():
        spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("Tq,Tk,causal", [(37, 53, False), (37, 53, True), (53, 37, True), (16, 16, True)])
def test_the_counts_are_the_tiled_algorithm_s_io(Tq, Tk, causal):
    """The interpreter's loads and stores, counted, equal the formula the spec states, element for element."""
    from attnkit.problems.triton_flash_attention import _io

    ref = _reference_module()
    q, k, v = (torch.randn(2, 2, t, 16) for t in (Tq, Tk, Tk))
    with interpreting(), watching() as watch:
        out, lse = ref.triton_flash_attention(q, k, v, causal, 16, 16)
    loads, stores = _io({}, [q, k, v, causal, 16, 16])
    assert (watch.loaded, watch.stored, watch.outside, len(watch.launches)) == (loads, stores, 0, 1)
    assert unwritten(watch, [out, lse], ["output", "lse"]) == []
    out[0, 0, 0, 0] += 1  # changed after the kernel stored it: no longer what the kernel wrote
    assert unwritten(watch, [out, lse], ["output", "lse"]) == ["output: changed after the last kernel stored it"]


@pytest.mark.parametrize("mistake,words", [
    ("scores_to_global", "was written to global memory"),  # a regular expression each
    ("query_reloaded", r"loaded Q [2-9]\.\dx"),
    ("causal_no_skip", r"wholly above the diagonal\) were loaded"),
])
def test_a_kernel_moving_more_than_the_tiling_needs_fails_traffic_alone(tmp_path, mistake, words):
    result = _graded(tmp_path, _patched(mistake))
    failing = _failing(result)
    assert set(failing) == {"traffic"}, failing
    message = failing["traffic"].message
    assert "elements and stored" in message and "the tiled algorithm loads at most" in message
    assert re.search(words, message), message
    assert failing["traffic"].mistake == mistake


def test_an_unmasked_load_of_a_partial_block_fails_bounds_naming_the_argument(tmp_path):
    failing = _failing(_graded(tmp_path, _patched("unmasked_key_load")))
    assert "bounds" in failing and "past the end of argument `K`" in failing["bounds"].message
    assert failing["bounds"].mistake == "unmasked_key_load"


def test_a_launcher_that_computes_in_torch_fails_traffic(tmp_path):
    """The kernel runs, but the launcher overwrites its output with torch's: the values are right, the kernel's
    work is not what came back."""
    source = SOURCE.replace("    return out, lse\n", "    s = (q.double() @ k.double().transpose(-2, -1)) * d ** -0.5\n"
                            "    if is_causal:\n"
                            "        s = s.masked_fill(~torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq), float('-inf'))\n"
                            "    out.copy_(torch.nan_to_num(torch.softmax(s, -1)) @ v.double())\n"
                            "    return out, lse\n")
    failing = _failing(_graded(tmp_path, source))
    assert "traffic" in failing and "not what its kernels stored" in failing["traffic"].message
    assert "output: changed after the last kernel stored it" in failing["traffic"].message


def test_tiles_too_large_for_the_registers_fail_onchip_with_the_numbers(tmp_path):
    """Tiles of 128 by 128 at d = 64 on 4 warps: 255 registers per thread, and the rest spills (cuobjdump's stack)."""
    source = SOURCE.replace("grid = (triton.cdiv(Tq, BLOCK_M), B * H)", "BLOCK_M = BLOCK_N = 128 if d == 64 else BLOCK_M\n"
                            "    grid = (triton.cdiv(Tq, BLOCK_M), B * H)")
    failing = _failing(_graded(tmp_path, source, sandbox=_compiling()))
    assert set(failing) == {"onchip"}, failing
    message = failing["onchip"].message
    assert re.search(r"compiled for sm_\d\d, kernel `_attention_forward` uses [\d,]+ bytes of shared memory and 255 "
                     r"registers per thread \(128 threads: 32,640 per block\), and [\d,]+ bytes per thread that did "
                     r"not fit the registers spill", message), message


@pytest.mark.slow
def test_a_kernel_is_compiled_as_a_launch_specialises_it(tmp_path):
    """A FlashAttention-2 forward with plain pointer arithmetic over all four strides, 4 warps, d = 64 and tiles of 64:
    compiled as a launch specialises it (16-byte aligned pointers and strides divisible by 16 carry tt.divisibility),
    it takes 165 registers and spills nothing; compiled without those hints it took 255 and spilled, and a correct
    kernel lost the onchip point."""
    source = (Path(__file__).parent / "unseen" / "triton_flash_attention__fa2_plain_pointers.py").read_text()
    result = _graded(tmp_path, source, sandbox=_compiling())
    assert _failing(result) == {}, {k: c.message for k, c in _failing(result).items()}


@pytest.mark.slow
def test_an_attribute_named_like_an_interpreter_global_is_no_global_of_the_kernel(tmp_path):
    """A kernel that transposes with `.T` (tensor descriptors made inside it): Triton's interpreter leaves its own names
    in the kernel's globals (a `T` among them), so the kernel's fingerprint reads the globals it loads, not every name
    its code holds; read that way, the kernel that ran is the kernel compiled, and the correct kernel keeps onchip."""
    source = (Path(__file__).parent / "unseen" / "triton_flash_attention__device_descriptors_4.py").read_text()
    result = _graded(tmp_path, source, sandbox=_compiling())
    assert _failing(result) == {}, {k: c.message for k, c in _failing(result).items()}


def test_reaching_the_interpreter_fails_the_counted_checks(tmp_path):
    source = SOURCE + "\nimport triton.runtime.interpreter as _it\n_it.interpreter_builder.create_masked_load = None\n"
    failing = _failing(_graded(tmp_path, source, sandbox=_compiling()))
    assert {"capabilities", "traffic", "bounds", "onchip"} <= set(failing)
    assert "the counts prove nothing" in failing["traffic"].message


def test_without_triton_the_stage_says_what_to_install(tmp_path):
    """Triton made unimportable in a child: `attnkit list` shows the one line, grading the problem by name is one line
    and exit 2, and a full grading leaves it out."""
    code = ("import sys; sys.modules['triton'] = None\n"
            "from attnkit.fronts.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    impl = make_impl(tmp_path / "impl", base=ROOT / "exercises")
    env = {k: v for k, v in os.environ.items() if k != "ATTNKIT_SKIP_STAGES"}
    listed = subprocess.run([sys.executable, "-c", code, "list", "--impl", str(impl)], capture_output=True, text=True,
                            timeout=300, env=env)
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if PID in ln)
    assert 'not available: needs triton, not installed (pip install -e ".[kernels]"' in line
    named = subprocess.run([sys.executable, "-c", code, "grade", "--impl", str(impl), "--problems", PID],
                           capture_output=True, text=True, timeout=300, env=env)
    assert named.returncode == 2 and named.stderr.count("\n") == 1 and ".[kernels]" in named.stderr
    assert "Traceback" not in named.stderr


def test_a_stage_named_in_attnkit_skip_stages_is_left_out_of_full_gradings_only(monkeypatch):
    from attnkit.problems import available, left_out

    monkeypatch.setenv("ATTNKIT_SKIP_STAGES", "serving, kernels")
    assert left_out(get(PID)) == "left out: ATTNKIT_SKIP_STAGES names its stage (kernels)"
    assert {p.track for p in available()}.isdisjoint({"serving", "kernels"})
    monkeypatch.setenv("ATTNKIT_SKIP_STAGES", "")
    assert left_out(get(PID)) is None and PID in {p.id for p in available()}


def test_a_process_that_imported_triton_without_the_interpreter_still_interprets():
    """Triton imported with the interpreter off (as a worker imports it before its sandbox): interpreting() swaps
    triton.language's own jit functions for interpreted twins, and puts them back after."""
    code = ("import torch, triton.language as tl\n"
            "from attnkit.run.kernels import interpreting\n"
            "import importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('ref', {str(SOLUTIONS / (PID + '.py'))!r})\n"
            "m = importlib.util.module_from_spec(spec)\n"
            "before = type(tl.zeros).__name__\n"
            "with interpreting():\n"
            "    spec.loader.exec_module(m)\n"
            "    q = torch.randn(1, 1, 20, 16, dtype=torch.float64)\n"
            "    out, lse = m.triton_flash_attention(q, q, q, False, 16, 16)\n"
            "ref = torch.nn.functional.scaled_dot_product_attention(q, q, q)\n"
            "print(before, type(tl.zeros).__name__, float((out - ref).abs().max()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    before, after, error = done.stdout.split()
    assert (before, after) == ("JITFunction", "JITFunction") and float(error) < 1e-12, done.stderr[-2000:]


HERE = ROOT / "tests" / "kernels"


def test_a_kernel_copying_what_the_launcher_computed_fails_traffic(tmp_path):
    """Attention in torch, a kernel that copies it into the outputs: the kernels loaded memory no input holds, and
    then no check's values count (the outputs are not the kernels' work)."""
    failing = _failing(_graded(tmp_path, (HERE / "torch_then_copy.py").read_text()))
    assert {"traffic", "parity_float64", "parity_float32", "oracle", "block_invariance", "stability"} <= set(failing)
    assert "from memory that is none of the call's inputs" in failing["traffic"].message
    assert "the outputs are not the kernels' work" in failing["parity_float64"].message


def _two_kernels() -> str:
    """The reference's kernel where the file is compiled, and where it is interpreted a far larger one that keeps a
    (BLOCK_M, 4096) tile live, told apart by tl.zeros' type (no name the source read refuses): a red team's file."""
    start, end = SOURCE.index("@triton.jit"), SOURCE.index("def _power_of_two")
    kernel = SOURCE[start:end]
    big = kernel.replace("        m_i = m_new\n", "        big = tl.exp(-tl.abs(tl.max(acc, 1)[:, None] * tl.arange(0, 4096)"
                         "[None, :].to(work) + tl.sum(acc, 1)[:, None]))\n        acc = acc + tl.minimum(tl.min(big, 1), "
                         "0.0)[:, None]\n        m_i = m_new\n")
    assert big != kernel

    def indent(text):
        return "\n".join("    " + line if line else line for line in text.splitlines())
    return (SOURCE[:start] + "if type(tl.zeros).__name__.startswith('JIT'):\n" + indent(kernel) + "\nelse:\n"
            + indent(big) + "\n\n" + SOURCE[end:])


def test_the_kernels_compiled_must_be_those_that_ran(tmp_path):
    """A file that defines another kernel when the interpreter is off fails onchip, however it tells them apart."""
    failing = _failing(_graded(tmp_path, _two_kernels(), sandbox=_compiling()))
    assert set(failing) == {"onchip"}, failing
    assert "defines other kernels when Triton's interpreter is off" in failing["onchip"].message
