"""The serving stage's draws reach what the contract singles out, and the checks that prove what is not computed can
fail: sliding windows of 1 and past Tk, sinks inside the window, Tq > Tk; paged caches with empty and full tables,
partial last blocks, GQA heads, int32 tables, NaN and inf in every unused slot; the memory calls on the shapes the
contract names."""
from __future__ import annotations

import torch

from attnkit.defaults import DEFAULT_SEED
from attnkit.judge.plan import draw
from attnkit.problems import get
from attnkit.problems.paged_attention import _used
from attnkit.problems.sliding_window_attention import allowed_keys
from conftest import grade_shared, make_impl

SOLUTIONS = __import__("pathlib").Path(__file__).resolve().parent.parent / "solutions"


def _calls(pid: str, seed: int = DEFAULT_SEED):
    for case in draw(get(pid), seed).values():
        if not case.must_raise:  # the calls with invalid arguments (value_errors) stand apart
            yield case


def _sliding_settings(case):
    args = case.call["args"]
    names = ("window", "num_sinks", "block_size")
    got = dict(zip(names, list(args[3:]) + [None, 0, 64][len(args) - 3:]))
    return args[0].shape[-2], args[1].shape[-2], got


def test_sliding_draws_reach_the_rule_s_corners():
    seen = set()
    for case in _calls("sliding_window_attention"):
        if len(case.call["args"]) < 4 or not isinstance(case.call["args"][0], torch.Tensor):
            continue
        Tq, Tk, a = _sliding_settings(case)
        seen.add("window 1" if a["window"] == 1 else "window >= Tk" if a["window"] >= Tk else "window < Tk")
        if 0 < a["num_sinks"] and a["window"] < Tk:
            allowed = allowed_keys(Tq, Tk, a["window"], a["num_sinks"])
            pos = torch.arange(Tq) + Tk - Tq
            if ((pos - a["window"] < 0) & (pos >= 0)).any():
                seen.add("a sink inside a window")
            if (allowed[:, : a["num_sinks"]].any() and (pos - a["window"] + 1 > a["num_sinks"]).any()):
                seen.add("a sink outside a window")
        if Tq > Tk:
            seen.add("Tq > Tk (rows with no key)")
        if Tq % a["block_size"] and a["block_size"] < Tq:
            seen.add("a partial last block")
    assert seen >= {"window 1", "window >= Tk", "window < Tk", "a sink inside a window", "a sink outside a window",
                    "Tq > Tk (rows with no key)", "a partial last block"}, seen


def test_sliding_memory_calls_keep_the_contract_s_conditions():
    cases = [c for c in _calls("sliding_window_attention") if c.group == "memory" and c.key != "memory/backstop"]
    assert cases
    for case in cases:
        Tq, Tk, a = _sliding_settings(case)
        L = case.call["args"][0].numel() // (Tq * case.call["args"][0].shape[-1])
        d, dv = case.call["args"][0].shape[-1], case.call["args"][2].shape[-1]
        w, s, b = a["window"], a["num_sinks"], a["block_size"]
        assert Tq == Tk >= 4 * L * (w + s + b) and Tq > max(d, dv) and d > 1 + b / (w + s), (case.key, Tq, a)
        assert L * Tq * Tk > case.meta["allowed"] and L * Tq * (w + s) * d > case.meta["allowed"]  # what it forbids


def test_paged_draws_reach_empty_full_partial_and_gqa():
    seen = set()
    for case in _calls("paged_attention"):
        args = case.call["args"]
        if len(args) != 5 or not isinstance(args[3], torch.Tensor):
            continue
        q, k_cache, _, tables, lens = args
        bs = k_cache.shape[1]
        seen |= {"length 0"} if (lens == 0).any() else set()
        seen |= {"a full table"} if (lens == tables.shape[1] * bs).any() else set()
        seen |= {"a partial last block"} if ((lens % bs) != 0).any() else set()
        seen |= {"GQA"} if q.shape[1] > k_cache.shape[2] > 1 else set()
        seen |= {str(tables.dtype)}
        used = _used(tables, lens.tolist(), k_cache.shape[0], bs)
        seen |= {"a free slot"} if (~used).any() else set()
    assert seen >= {"length 0", "a full table", "a partial last block", "GQA", "torch.int32", "torch.int64",
                    "a free slot"}, seen


def test_paged_memory_calls_keep_the_contract_s_conditions():
    cases = [c for c in _calls("paged_attention") if c.group == "memory"]
    assert len(cases) >= 2  # the small calls and the backstop
    for case in cases:
        q, k_cache, _, tables, lens = case.call["args"]
        B, Hq = q.shape[:2]
        N, bs, Hkv, d = k_cache.shape
        G = Hq // Hkv
        assert N < B * tables.shape[1] and min(B, tables.shape[1]) > G, case.key
        assert lens.max() > 4 * lens.min()  # padded: one sequence much longer than the others
        assert B * tables.shape[1] * bs * Hkv * d > case.meta["allowed"], case.key  # the whole batch breaks it


def test_nan_in_unused_storage_fails_code_that_masks_after_the_values(tmp_path):
    """Masking the scores but multiplying every slot's value (0 * NaN) is right on finite garbage: the drawn caches hold
    NaN in unused slots, so every check that compares values catches it, and the NaN and inf relation too."""
    source = (SOLUTIONS / "paged_attention.py").read_text()
    wrong = source.replace("v = v_cache[blocks].reshape(-1, Hkv, dv)[:n]",
                           "v = v_cache[blocks].reshape(-1, Hkv, dv)\n"
                           "        v = torch.cat((v[:n], v[n:] * 0.0))")  # every slot multiplied: 0 * NaN
    wrong = wrong.replace('weights = torch.softmax(scores, dim=-1)',
                          'weights = torch.cat((torch.softmax(scores, dim=-1), '
                          'scores.new_zeros(*scores.shape[:-1], v.shape[0] - n)), -1)')
    assert wrong != source
    report = grade_shared(make_impl(tmp_path, {"paged_attention.py": wrong}), ["paged_attention"])
    failing = {c.id for c in report.problem("paged_attention").checks if c.status == "failed"}
    assert {"metamorphic", "parity_float64", "oracle", "gradients"} <= failing, failing


def test_latent_memory_calls_keep_the_contract_s_conditions():
    """Decoding shapes where the cached tokens' per-head keys exceed the absorbed bound (section 19)."""
    cases = [c for c in _calls("latent_attention") if c.group == "memory" and c.key != "memory/backstop"]
    assert cases
    for case in cases:
        c = case.cfg
        T, P, H, r, dn, dr, dv = c["T"], c["P"], c["H"], c["r"], c["dn"], c["dr"], c["dv"]
        assert T <= 3 and P >= 16 * T
        for width in (dn, dv):
            assert (P + T) * width > max(P + T, r, dn + dr, dv) and (P + T) * width > H * (dn + dv) * r
        assert c["B"] * (P + T) * H * dn > case.meta["allowed"]  # the per-head keys break it
        assert case.call["args"][2:] == [True] or case.call["args"][-1] is True  # measured with absorb=True
