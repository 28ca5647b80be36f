"""Wrong code that a fifth red team (a helper with the kit's source) got full marks with, each now failing its check:
dropout of its own in train() where the contract asks none, a decoding step computed under no_grad, an in-place
softmax on the path without a mask, a tensor built whole from T = 3 where latent attention's bound holds up to T = 3,
keys and values repeated per query head only when the inputs require grad, a decoder's state detached every 16 steps,
a decoder's step() keeping its projection of the memory, a frequency table kept in the dtype of the first call, a
path of its own when query is key is value, and dropout masks drawn from a seed set on every call, or one mask shared
by every head. Each test patches one line of a reference solution, as the red team's files did; the references
themselves pass (the solutions' full marks test)."""
from __future__ import annotations

import pytest

from conftest import SOLUTIONS, make_impl
from attnkit.grading import grade

pytestmark = pytest.mark.slow  # a grading per case: in the slow suite, which .ci/run also runs


def _patched(pid: str, old, new) -> str:
    """The reference's source with `old` replaced by `new` (strings, or tuples of them replaced pairwise)."""
    source = (SOLUTIONS / f"{pid}.py").read_text()
    for a, b in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,)))):
        assert a in source
        source = source.replace(a, b)
    return source


def _failed(report, pid) -> dict:
    return {c.id: c.message for c in report.problem(pid).checks if c.status == "failed"}


CASES = {
    "train_dropout_of_its_own": (  # nanoGPT's attention dropout of 0.1 in a module whose contract has none
        "causal_self_attention", "        context = torch.softmax(scores, dim=-1) @ values",
        "        context = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), 0.1, self.training) @ values",
        "parity_float64", ".train()("),
    "decoding_step_under_no_grad": (  # generation as inference: no gradient from a one-token step with a cache
        "causal_self_attention", "        return self.W_o(context.transpose(1, 2).reshape(B, T, E)), (k, v)",
        "        out = self.W_o(context.transpose(1, 2).reshape(B, T, E))\n"
        "        return (out.detach() if T == 1 and cache is not None else out), (k, v)",
        "gradients", "T=1,"),
    "in_place_softmax_without_a_mask": (
        "masked_softmax", "        return torch.softmax(scores, dim=-1)",
        "        e = (scores - scores.amax(-1, keepdim=True)).exp()\n        return e.div_(e.sum(-1, keepdim=True))",
        "gradients", "valid_lens=None"),
    "latent_decompressed_from_three_tokens": (  # the contract's bound holds for T <= 3
        "latent_attention", "        if absorb:  # q_nope . (W_uk c)", "        if absorb and T <= 2:  # q_nope . (W_uk c)",
        "memory", "T=3"),
    "one_path_when_query_is_key_is_value": (
        "multihead_attention", "        B, Tq, _ = queries.shape",
        "        if queries is keys is values:  # a fused path of its own, its heads split otherwise\n"
        "            queries = queries.flip(-1)\n        B, Tq, _ = queries.shape",
        "parity_float64", "x, x, x"),
    "repeated_kv_when_inputs_require_grad": (  # a training path of its own, past the bound
        "grouped_query_attention", "    B, Hq, Tq, d = queries.shape",
        "    B, Hq, Tq, d = queries.shape\n"
        "    if queries.requires_grad and Hq != keys.shape[1]:\n"
        "        G = Hq // keys.shape[1]\n"
        "        return grouped_query_attention(queries, keys.repeat_interleave(G, 1), values.repeat_interleave(G, 1), mask)",
        "memory", "inputs that require grad"),
    "state_detached_every_16_steps": (  # truncated backpropagation through time
        "attentional_decoder", "            o_t, w_t, state = self.step(targets[:, t], memory, memory_mask, state)",
        "            if t and t % 16 == 0:\n"
        "                state = tuple(s.detach() for s in state)\n"
        "            o_t, w_t, state = self.step(targets[:, t], memory, memory_mask, state)",
        "gradients", "T=37"),
    "one_dropout_mask_for_every_head": (  # a (B, 1, Tq, Tk) mask broadcast over the heads
        "multihead_attention", "        context = self.dropout(weights) @ v  # (B, H, Tq, d)",
        "        keep = self.dropout(torch.ones_like(weights[:, :1]))  # one mask, broadcast over H\n"
        "        context = (weights * keep) @ v  # (B, H, Tq, d)",
        "dropout", "the heads dropped the same weights"),
    "step_keeps_the_projected_memory": (  # step() called alone keeps it while the memory is the same object
        "attentional_decoder", ("        keys = self.W_a(memory)  # (B, S, Hd): W_a m_s",
                                "            o_t, w_t, state = self.step(targets[:, t], memory, memory_mask, state)"),
        ("        if getattr(self, '_memory', None) is not memory or self.__dict__.get('_forward'):\n"
         "            self.__dict__['_memory'], self.__dict__['_keys'] = memory, self.W_a(memory)\n"
         "        keys = self._keys",
         "            self.__dict__['_forward'] = True\n"
         "            o_t, w_t, state = self.step(targets[:, t], memory, memory_mask, state)\n"
         "            self.__dict__['_forward'] = False"),
        "reuse", "through step()"),
    "dropout_seeded_on_every_call": (
        "luong_attention", "        return torch.bmm(self.dropout(weights), values), weights",
        "        torch.manual_seed(0)\n        return torch.bmm(self.dropout(weights), values), weights",
        "dropout", "two calls in a row"),
    "recurrent_dropout_seeded_on_every_call": (
        "attentional_decoder", "        outputs, weights = [], []",
        "        outputs, weights = [], []\n        torch.manual_seed(0)",
        "recurrent_dropout", "two calls in a row"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wrong_code_the_fifth_red_team_found_fails(tmp_path, name):
    pid, old, new, check, words = CASES[name]
    files = {f"{pid}.py": _patched(pid, old, new)}
    if pid in ("causal_self_attention", "latent_attention"):
        files["rope.py"] = (SOLUTIONS / "rope.py").read_text()
    if pid == "luong_attention":
        files["masked_softmax.py"] = (SOLUTIONS / "masked_softmax.py").read_text()
    failed = _failed(grade(make_impl(tmp_path, files), [pid], sandbox=False), pid)
    assert check in failed and words in failed[check], failed


def test_a_frequency_table_kept_in_the_first_calls_dtype_fails(tmp_path):
    """RoPE's frequencies cached by (d, base) only: the calls come in an order of their own (judge/plan.calls), not
    every float64 one first, so the table is float32 for some float64 call (or float64 for a float32 one)."""
    code = _patched("rope", "    theta = base ** (-2 * i / d)  # (d/2,)",
                    "    theta = _THETA.setdefault((d, base, x.device), base ** (-2 * i / d))  # (d/2,)")
    code = code.replace("def apply_rope(", "_THETA = {}\n\n\ndef apply_rope(", 1)
    failed = _failed(grade(make_impl(tmp_path, {"rope.py": code}), ["rope"], sandbox=False), "rope")
    assert failed, "the cached table passed"
