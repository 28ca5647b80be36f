"""The attentional decoder and cross-attention (sections 15 and 16): what their own check units prove.

- metamorphic: each relation the decoder's spec declares is broken by the code it is there for (the concatenation
  orders, input feeding), and only that relation's check fails there;
- recurrent_dropout: a correct dropout whose random draws differ from the reference's passes (the check replays the
  learner's own outputs, it never compares random draws), and dropout fed forward undropped fails;
- steps: a step method that differs from forward fails the steps check alone;
- memory_cache: with a cache given, the memory must be ignored and may be None;
- the hidden calls reach what the contract singles out: rows with no source token, memory_dim != embed_dim, a given
  initial state, train() with dropout 1;
- what a red team tried (detached or modified states and caches, dropout of the wrong rate or shape, values kept from
  an earlier call, code that behaves only on small inputs) fails the check made for it."""
from __future__ import annotations

import pytest
import torch

from conftest import SOLUTIONS, make_impl
from attnkit.defaults import DEFAULT_SEED
from attnkit.grading import grade
from attnkit.judge.plan import draw
from attnkit.problems import get

DECODER, CROSS = "attentional_decoder", "cross_attention"


def _source(pid, old, new, count=1):
    source = (SOLUTIONS / f"{pid}.py").read_text()
    assert source.count(old) == count, old
    return source.replace(old, new)


def _checks(tmp_path, pid, source):
    result = grade(make_impl(tmp_path, {f"{pid}.py": source}), [pid]).problem(pid)
    return {c.id: c for c in result.checks}


def test_the_metamorphic_relations_catch_the_orders_and_input_feeding(tmp_path):
    """[ctx ; h] breaks ctx_columns, [o ; y] breaks o_columns or y_columns, zeros fed break feeds_o: each says the
    contract's rule."""
    cases = {
        "ctx first": ("torch.cat((h, ctx), dim=-1)", "torch.cat((ctx, h), dim=-1)", "the memory reaches only the weights"),
        "o first": ("torch.cat((y_t, o), dim=-1)", "torch.cat((o, y_t), dim=-1)", "embedding first"),
        "no feeding": ("torch.cat((y_t, o), dim=-1)", "torch.cat((y_t, torch.zeros_like(o)), dim=-1)", "input feeding"),
    }
    for i, (old, new, says) in enumerate(cases.values()):
        checks = _checks(tmp_path / str(i), DECODER, _source(DECODER, old, new))
        assert checks["metamorphic"].status == "failed" and says in checks["metamorphic"].message, \
            checks["metamorphic"].message
    assert _checks(tmp_path / "ok", DECODER, (SOLUTIONS / f"{DECODER}.py").read_text())["metamorphic"].status == "passed"


def test_a_correct_dropout_drawn_another_way_passes_and_one_fed_forward_undropped_fails(tmp_path):
    """The recurrent_dropout check replays the learner's own dropped outputs: its masks may come from any draw."""
    line = "o = self.dropout(torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1))))"
    own = ("raw = torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1)))\n"
           "        p = self.dropout.p\n"
           "        keep = (torch.rand(raw.shape, dtype=raw.dtype, device=raw.device) >= p) if self.training else None\n"
           "        o = raw if keep is None else (raw * keep / (1 - p) if p < 1 else raw * 0)")
    checks = _checks(tmp_path / "own", DECODER, _source(DECODER, line, own))
    assert checks["recurrent_dropout"].status == "passed", checks["recurrent_dropout"].message
    undropped = _source(DECODER, line, "raw = torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1)))\n        o = self.dropout(raw)")
    undropped = undropped.replace("        return o, weights, (h, c, o)", "        return o, weights, (h, c, raw)")
    checks = _checks(tmp_path / "undropped", DECODER, undropped)
    failing = {k for k, c in checks.items() if c.status == "failed"}
    assert failing == {"recurrent_dropout"}, failing


def test_a_step_that_differs_from_forward_fails_only_the_checks_that_call_step(tmp_path):
    """forward right (its own loop), step ignoring memory_mask: only the checks that call step see it (steps, and the
    recurrent dropout's stepped call)."""
    source = (SOLUTIONS / f"{DECODER}.py").read_text()
    source = source.replace("    def step(self, y_t", "    def _one(self, y_t").replace("self.step(targets[:, t]", "self._one(targets[:, t]")
    source += ("\n    def step(self, y_t, memory, memory_mask=None, state=None):\n"
               "        return self._one(y_t, memory, None, state)\n")
    checks = _checks(tmp_path, DECODER, source)
    failing = {k for k, c in checks.items() if c.status == "failed"}
    assert failing == {"steps", "recurrent_dropout", "reuse"}, failing  # reuse: its calls through step() too
    assert "differs from forward on the whole sequence" in checks["steps"].message


def test_with_a_cache_the_memory_may_be_none_and_is_ignored(tmp_path):
    """Code that needs memory even with a cache (it reads its shape) fails memory_cache, saying memory may be None."""
    source = _source(CROSS, "        k, v = cache\n", "        S = memory.shape[1]\n        k, v = cache\n")
    checks = _checks(tmp_path, CROSS, source)
    assert checks["memory_cache"].status == "failed"
    assert "memory may be None" in checks["memory_cache"].message, checks["memory_cache"].message
    assert checks["parity_float64"].status == "passed"


def test_the_hidden_calls_reach_what_the_contract_singles_out():
    """Rows with no source token (both problems); memory_dim given and left to its default; an initial state given
    (the decoder); train() with dropout 1."""
    for pid in (DECODER, CROSS):
        cases = draw(get(pid), DEFAULT_SEED).values()
        masks = [c.call["args"][2] for c in cases if len(c.call.get("args") or []) > 2
                 and isinstance(c.call["args"][2], torch.Tensor)]
        assert any((~m).all(-1).any() for m in masks), pid
        assert any(c.call.get("train") and c.call["ctor"]["kwargs"].get("dropout") == 1.0 for c in cases) or pid == CROSS
    cross = draw(get(CROSS), DEFAULT_SEED).values()
    kwargs = [c.call["ctor"]["kwargs"] for c in cross if c.call.get("ctor")]
    assert any("memory_dim" in k for k in kwargs) and any("memory_dim" not in k for k in kwargs)
    decoder = draw(get(DECODER), DEFAULT_SEED).values()
    assert any(len(c.call.get("args") or []) > 3 and isinstance(c.call["args"][3], tuple) for c in decoder)


def test_the_cross_attention_oracle_is_the_same_with_key_padding_mask():
    """The oracle passes the inverted memory mask as attn_mask (the key_padding_mask path imports sympy, 0.37 s of every
    run): nn.MultiheadAttention gives the same with key_padding_mask=~memory_mask, on every row with an allowed key."""
    from attnkit.problems.cross_attention import _oracle

    cases = [c for c in draw(get(CROSS), DEFAULT_SEED).values() if c.group == "base"
             and isinstance((c.call["args"] + [None])[2], torch.Tensor)]
    assert cases
    for case in cases:
        spread, padding = _oracle(case.call), _oracle(case.call, padding=True)
        rows = case.call["args"][2].any(-1)
        for a, b in zip(spread, padding):
            assert torch.allclose(a[rows], b[rows], atol=1e-12, rtol=0), case.key


def test_the_public_checks_lay_a_memory_mask_out_per_batch_row(tmp_path):
    """The quick checks (notebooks, bundles) read a (B, S) memory mask as the mask rule lays it out, (B, 1.., S): the
    references pass them, and a decoder that ignores the mask is told that masked keys got weight."""
    from attnkit.integrations.public import quick_checks

    for pid in (DECODER, CROSS):
        target = _load(tmp_path, pid, (SOLUTIONS / f"{pid}.py").read_text())
        assert all(why is None for _, why in quick_checks(get(pid), target)), quick_checks(get(pid), target)
    ignored = _source(DECODER, "        if memory_mask is None:\n            weights", "        if True:\n            weights")
    found = [why for _, why in quick_checks(get(DECODER), _load(tmp_path, "ignored", ignored))]
    assert any(why and "masked keys got nonzero weight" in why for why in found), found


def _load(tmp_path, name, source):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"seq2seq_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, get(DECODER if "decoder" in name or name == "ignored" else CROSS).symbol)


def test_a_wrong_state_only_under_dropout_fails(tmp_path):
    """In train() with 0 < p < 1 the returned state is replayed too: a cell state zeroed there alone fails."""
    source = _source(DECODER, "        return torch.stack(outputs, dim=1), torch.stack(weights, dim=1), state",
                     "        if self.training and 0 < self.dropout.p < 1:\n"
                     "            state = (state[0], state[1] * 0, state[2])\n"
                     "        return torch.stack(outputs, dim=1), torch.stack(weights, dim=1), state")
    checks = _checks(tmp_path, DECODER, source)
    failing = {k for k, c in checks.items() if c.status == "failed"}
    assert failing == {"recurrent_dropout"} and "the returned state" in checks["recurrent_dropout"].message, failing


DROP = "o = self.dropout(torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1))))"
RAW = "raw = torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1)))\n        p = self.dropout.p\n        "
ATTACKS = {  # what a red team tried against these two problems: each fails the check named, with the reference patched
    "decoder: the given state detached": (DECODER, "gradients", [("        h, c, o = state\n",
                                                                 "        h, c, o = (t.detach() for t in state)\n")]),
    "decoder: the state's c float64 when given": (DECODER, "side_effects", [(
        "        return o, weights, (h, c, o)", "        return o, weights, (h, c.double() if state is not None and "
        "y_t.dtype == torch.float32 else c, o)")]),
    "decoder: the targets zeroed in place": (DECODER, "side_effects", [(
        "        return torch.stack(outputs, dim=1)", "        targets.data.zero_()\n        return torch.stack(outputs, dim=1)")]),
    "decoder: whole rows dropped": (DECODER, "recurrent_dropout", [(DROP, RAW + "keep = (torch.rand(raw.shape[0], 1, "
        "dtype=raw.dtype) >= p) if self.training and 0 < p < 1 else None\n        o = raw if keep is None else raw * keep "
        "/ (1 - p) if p < 1 else self.dropout(raw)")]),
    "decoder: dropped at p / 5": (DECODER, "recurrent_dropout", [(DROP, RAW + "keep = (torch.rand(raw.shape, "
        "dtype=raw.dtype) >= p / 5) if self.training and 0 < p < 1 else None\n        o = raw if keep is None else raw * "
        "keep / (1 - p) if p < 1 else self.dropout(raw)")]),
    "decoder: a parameter added by forward": (DECODER, "reuse", [(
        "        outputs, weights = [], []\n", "        if not hasattr(self, 'extra'):\n"
        "            self.extra = nn.Parameter(torch.zeros(1, dtype=targets.dtype))\n        outputs, weights = [], []\n")]),
    "decoder: T = 1 ignores the mask": (DECODER, "kv_cache", [(
        "self.step(targets[:, t], memory, memory_mask, state)",
        "self.step(targets[:, t], memory, memory_mask if targets.shape[1] > 1 else None, state)")]),
    "cross: the given cache zeroed in place": (CROSS, "side_effects", [(
        "        k, v = cache\n", "        k, v = cache\n        given = cache\n"), (
        "        return self.W_o(", "        if given is not None:\n            k.data.zero_()\n            v.data.zero_()\n"
        "        return self.W_o("), ("        H, d = self.H, self.d\n", "        H, d, given = self.H, self.d, cache\n")]),
    "cross: the given cache detached": (CROSS, "gradients", [("        k, v = cache\n",
                                                              "        k, v = cache[0].detach(), cache[1].detach()\n")]),
    "cross: scaled right for p = 0.3 and 0.6 alone": (CROSS, "dropout", [(
        "        context = self.dropout(weights) @ v", "        p = self.dropout.p\n        context = (self.dropout(weights)"
        " * (1 if p in (0.3, 0.6) or not self.training else (1 - p))) @ v")]),
    "cross: the projection remembered by the memory's address": (CROSS, "reuse", [(
        "            cache = (heads(self.W_k(memory)), heads(self.W_v(memory)))",
        "            key = (memory.data_ptr(), tuple(memory.shape))\n            memo = self.__dict__.setdefault('_memo', {})\n"
        "            if key not in memo:\n                memo[key] = (heads(self.W_k(memory)), heads(self.W_v(memory)))\n"
        "            cache = memo[key]")]),
    "cross: its own cache re-projected from a memory given beside it": (CROSS, "memory_cache", [(
        "        if cache is None:\n", "        if cache is not None and memory is not None and getattr(self, '_own', None) is "
        "cache[0]:\n            cache = None\n        if cache is None:\n"), (
        "        return self.W_o(", "        self._own = cache[0]\n        return self.W_o(")]),
    "cross: the mask ignored past 16 positions": (CROSS, "memory_cache", [(
        "        if memory_mask is None:\n", "        if memory_mask is None or k.shape[-2] > 16:\n")]),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_what_the_red_team_tried_fails(tmp_path, attack):
    pid, check, patches = ATTACKS[attack]
    source = (SOLUTIONS / f"{pid}.py").read_text()
    for old, new in patches:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    checks = _checks(tmp_path, pid, source)
    assert checks[check].status == "failed", {k: c.status for k, c in checks.items()}
