"""Ways a wrong submission used to pass, each closed: NaN gradients from a row with no allowed key, a finite fill of
-1e4 that leaks weight once valid scores sit near -1e4, a persistent buffer in a module's state_dict, a float16 input
answered in float32 (half dtypes are drawn on the CPU too), a 3-D mask whose layout is guessed from its leading size
(calls with B equal to the heads), and a sliding window compared with Tq instead of Tk (a decoding step)."""
from __future__ import annotations

import pytest

from conftest import SOLUTIONS, make_impl
from attnkit.grading import grade


def _check(report, pid, cid):
    return next(c for c in report.problem(pid).checks if c.id == cid)


def test_nan_gradients_of_a_row_with_no_allowed_key_fail(tmp_path):
    """-inf fill, the forward cleaned with nan_to_num: right values, NaN gradients on an empty row."""
    code = '''import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(scores.shape[-1]) < lens[..., None]
    bias = torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores + bias, dim=-1), nan=0.0)
'''
    report = grade(make_impl(tmp_path, {"masked_softmax.py": code}), ["masked_softmax"], sandbox=False)
    grads = _check(report, "masked_softmax", "gradients")
    assert grads.status == "failed" and "no allowed key" in grads.message and "NaN" in grads.message
    others = [c for c in report.problem("masked_softmax").checks if c.id != "gradients" and c.status == "failed"]
    assert others == [], [c.id for c in others]


def test_the_bounds_the_contract_names_are_all_a_sliding_window_must_refuse(tmp_path):
    """Section 17: "window >= 1, num_sinks >= 0, block_size >= 1, else ValueError", and no word of bools or floats
    (as sections 14 and 18 have): the reference checks the bounds only, as the stub's hint does (the solutions' full
    marks test grades it), and code that also refuses a bool or a float gets every point too."""
    code = _patched("sliding_window_attention", "    if window < 1 or num_sinks < 0 or block_size < 1:",
                    "    if any(isinstance(n, bool) or not isinstance(n, int) for n in (window, num_sinks, block_size)):\n"
                    "        raise ValueError('window, num_sinks and block_size are ints')\n"
                    "    if window < 1 or num_sinks < 0 or block_size < 1:")
    report = grade(make_impl(tmp_path, {"sliding_window_attention.py": code}), ["sliding_window_attention"], sandbox=False)
    assert _check(report, "sliding_window_attention", "value_errors").status == "passed"
    assert report.problem("sliding_window_attention").status == "passed"


def test_a_fill_of_minus_1e4_fails_the_stability_check(tmp_path):
    """The old BERT constant, without the mask applied again after the softmax: exact zeros for ordinary scores
    (exp(-1e4) underflows), a leak once the valid scores sit near -1e4."""
    code = '''import torch


def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(scores.shape[-1]) < lens[..., None]
    return torch.softmax(scores.masked_fill(~keep, -1e4), dim=-1)
'''
    report = grade(make_impl(tmp_path, {"masked_softmax.py": code}), ["masked_softmax"], sandbox=False)
    stability = _check(report, "masked_softmax", "stability")
    assert stability.status == "failed" and "masked key" in stability.message and "exactly 0" in stability.message


def test_a_persistent_buffer_fails_the_parameters_check(tmp_path):
    code = (SOLUTIONS / "multihead_attention.py").read_text()
    anchor = "super().__init__()\n"
    assert anchor in code
    code = code.replace(anchor, anchor + "        self.register_buffer(\"causal\", torch.ones(4, 4).tril())\n", 1)
    report = grade(make_impl(tmp_path, {"multihead_attention.py": code}), ["multihead_attention"], sandbox=False)
    params = _check(report, "multihead_attention", "parameters")
    assert params.status == "failed" and "persistent=False" in params.message and "causal" in params.message
    fixed = code.replace('torch.ones(4, 4).tril())', 'torch.ones(4, 4).tril(), persistent=False)')
    report = grade(make_impl(tmp_path / "fixed", {"multihead_attention.py": fixed}), ["multihead_attention"],
                   sandbox=False)
    assert _check(report, "multihead_attention", "parameters").status == "passed"


def _patched(pid, old, new):
    source = (SOLUTIONS / f"{pid}.py").read_text()
    assert old in source
    return source.replace(old, new)


@pytest.mark.parametrize("how, fails", [("never cast back", True), ("no Half kernel on this CPU", False)])
def test_half_inputs_keep_their_dtype_on_the_cpu(tmp_path, how, fails):
    """Angles in float32 for a float16 input, as the contract allows, and the result not cast back: a float32 output;
    a call that raises in half (as a CPU without the kernel would) is left to the GPU's check, not failed here."""
    new = "    return rotated" if fails else \
        "    if x.dtype in (torch.float16, torch.bfloat16):\n        raise RuntimeError(\"not implemented for 'Half'\")\n" \
        "    return rotated.to(x.dtype)"
    code = _patched("rope", "    return rotated.to(x.dtype)", new)
    report = grade(make_impl(tmp_path, {"rope.py": code}), ["rope"], sandbox=False)
    side = _check(report, "rope", "side_effects")
    assert side.status == ("failed" if fails else "passed"), side.message
    if fails:
        assert "float32, expected float16" in side.message
    assert all(c.status in ("passed", "skipped") for c in report.problem("rope").checks if c.id != "side_effects")


def test_a_mask_layout_guessed_from_its_leading_size_fails(tmp_path):
    """A (Hq, Tq, Tk) mask read as per-batch (B, Tq, Tk) when its leading size equals B: right whenever B != Hq."""
    code = _patched("grouped_query_attention", "    B, Hq, Tq, d = queries.shape\n",
                    "    B, Hq, Tq, d = queries.shape\n    if mask is not None and mask.dim() == 3 and mask.shape[0] == B:\n"
                    "        mask = mask[:, None]\n")
    report = grade(make_impl(tmp_path, {"grouped_query_attention.py": code}), ["grouped_query_attention"], sandbox=False)
    result = report.problem("grouped_query_attention")
    assert _check(report, "grouped_query_attention", "parity_float64").status == "failed"
    assert "B equals the next dim" in "\n".join(result.unexplained)


@pytest.mark.parametrize("pid, old, new", [
    ("sliding_window_attention", "    outs = []\n",  # window >= Tq with no sinks taken as plain causal attention
     "    outs = []\n    if window >= Tq and num_sinks == 0:\n        window = Tk + 1\n"),
    ("alibi_attention", "[:, None] + (Tk - Tq)",  # a decoding step's one query put at position 0
     "[:, None] + ((Tk - Tq) if Tq > 1 else 0)"),
    ("flash_attention", "shift = Tk - Tq", "shift = Tk - Tq if Tq > 1 else 0"),
], ids=["window_vs_tq", "alibi_decode_at_0", "flash_decode_at_0"])
def test_code_that_special_cases_a_decoding_step_fails(tmp_path, pid, old, new):
    """Right for every Tq > 1, wrong for one query after several keys (a decoding step)."""
    report = grade(make_impl(tmp_path, {f"{pid}.py": _patched(pid, old, new)}), [pid], sandbox=False)
    assert _check(report, pid, "parity_float64").status == "failed"


@pytest.mark.parametrize("pid, old, new, check", [
    ("scaled_dot_product_attention", "    if mask is None:\n",  # a path taken past 64 keys only (draw/long.py)
     "    if keys.shape[-2] > 64:\n        mask = None\n    if mask is None:\n", "parity_float64"),
    ("masked_softmax", "    filled = scores", "    filled = scores.float()",  # a float32 step: float64's tolerance
     "parity_float64"),
    ("masked_softmax", "    lens = valid_lens if valid_lens.dim() == 2",  # (B, Tq) lengths read transposed when B == Tq
     "    if valid_lens.dim() == 2 and valid_lens.shape[0] == scores.shape[1]:\n        valid_lens = valid_lens.T\n"
     "    lens = valid_lens if valid_lens.dim() == 2", "parity_float64"),
    ("scaled_dot_product_attention", "    if mask is None:\n",  # a 1-D mask read as a per-query column when Tq == Tk
     "    if mask is not None and mask.dim() == 1 and mask.shape[0] == queries.shape[-2]:\n        mask = mask[:, None]\n"
     "    if mask is None:\n", "parity_float64"),
    ("numpy_additive_attention", "    e = e - e.max()", "    e = e - e.max() if e.dtype == np.float32 else e",  # float64
     "stability"),
    ("attention_backward", "import torch\n", "import torch\n", "parity_float32"),  # float32 empty causal rows NaN
    ("cross_attention", "import torch\n", "import torch\n", "value_errors"),
    ("causal_self_attention", "positions = torch.arange(P, P + T, device=x.device)",  # a table of 1024 positions
     "positions = torch.arange(P, P + T, device=x.device).clamp(max=1023)", "parity_float64"),
    ("linear_attention", "    S = S + k[..., :, None] * v_t[..., None, :]",  # a batch of one updated in place
     "    if S.shape[0] == 1:\n        S += k[..., :, None] * v_t[..., None, :]\n    else:\n"
     "        S = S + k[..., :, None] * v_t[..., None, :]", "companion"),
    ("grouped_query_attention", "    if Hq % Hkv:", "    if Hq < Hkv:", "value_errors"),  # only more key heads refused
    ("paged_attention", "    if Hq % Hkv:", "    if Hq < Hkv:", "value_errors"),
    ("local_attention", "if type(align_dim) is not int or align_dim < 1:",  # a bool or float size accepted
     "if align_dim is None or align_dim < 1:", "parameters"),
    ("rope", "    theta = base ** (-2 * i / d)",  # the interleaved path ignores base
     "    theta = (10000.0 if interleaved else base) ** (-2 * i / d)", "parity_float64"),
], ids=["long_path", "float32_step", "lens_transposed_if_square", "mask_1d_as_column_if_square", "shift_float32_only",
        "float32_causal_empty_rows", "cache_kept_on_module", "positions_past_1023", "step_in_place_for_one_row",
        "hq_not_a_multiple_below", "paged_hq_not_a_multiple_below", "align_dim_bool",
        "interleaved_ignores_base"])
def test_wrong_code_that_the_earlier_draws_let_pass_fails(tmp_path, pid, old, new, check):
    """Each is right on every call the grader drew before: code taken past some length (64 keys, 1024 positions),
    float32 inside float64 on short inputs, a form told apart by a size, float64 overflow, causal float32 rows with no
    key, state kept by a module, a given state updated in place for a batch of one only."""
    code = _patched(pid, old, new)
    if pid == "attention_backward":  # float32 divides by the row's sum as it is: 0 / 0 on a row with no allowed key
        code = code.replace("torch.where(total > 0, total, torch.ones_like(total))",
                            "(torch.where(total > 0, total, torch.ones_like(total)) if work == torch.float64 else total)")
    if pid == "cross_attention":  # memory=None and no cache: the cache of the module's last call stands in
        code = code.replace("        if cache is None:\n", "        if cache is None and memory is None:\n"
                            "            cache = getattr(self, '_kept', None)\n        if cache is None:\n", 1)
        code = code.replace("        k, v = cache\n", "        k, v = cache\n        self._kept = cache\n", 1)
    report = grade(make_impl(tmp_path, {f"{pid}.py": code}), [pid], sandbox=False)
    assert _check(report, pid, check).status == "failed", [(c.id, c.status) for c in report.problem(pid).checks]


@pytest.mark.parametrize("pid, old, new, check", [
    ("masked_softmax", "    lens = valid_lens if",  # (B, Tq, Tk) viewed as (B * Tq, Tk): a copy where not contiguous
     "    scores = scores.view(-1, scores.shape[-1]).view(scores.shape)\n    lens = valid_lens if", "parity_float64"),
    ("scaled_dot_product_attention", "(queries, keys, values, mask=None)", "(queries, keys, values, attn_mask=None)",
     "parity_float64"),  # a parameter renamed: called by keyword as the contract names it
    ("multihead_attention", "        v = self.W_v(values)",  # self-attention told apart by identity
     "        v = (self.W_k if values is keys else self.W_v)(values)", "parity_float64"),
    ("scaled_dot_product_attention", "    return weights @ values, weights",  # detached when the queries need no grad
     "    weights = weights if queries.requires_grad else weights.detach()\n    return weights @ values, weights",
     "gradients"),
    ("masked_softmax", "    lens = valid_lens if", "    valid_lens = valid_lens if valid_lens.dtype == torch.int64 else "
     "valid_lens.to(torch.int8)\n    lens = valid_lens if", "parity_float64"),  # lengths past 127 in int32
    ("alibi_attention", "    if slopes is None:\n", "    if slopes is None or (H > 4 and H & (H - 1) == 0):\n",
     "parity_float64"),  # given slopes ignored for 8 heads
    ("multihead_attention", "        k = self.W_k(keys)",  # keys projected once under no_grad, kept by identity
     "        if not torch.is_grad_enabled() and getattr(self, '_seen', (None,))[0] is keys:\n"
     "            k0 = self._seen[1]\n        else:\n            k0 = self.W_k(keys)\n"
     "            if not torch.is_grad_enabled():\n                self._seen = (keys, k0)\n"
     "        k = k0", "parity_float64"),
    ("attention_backward", "        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)",
     "        allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)\n"  # rows past 64 as 0..
     "        allowed[64:] = allowed[:Tq - 64] if Tq > 64 else allowed[64:]", "parity_float64"),
], ids=["view_of_input", "parameter_renamed", "values_is_keys", "detached_without_query_grad", "int8_lengths",
        "given_slopes_ignored_for_8_heads", "projection_kept_in_inference", "query_blocks_of_64_offset_lost"])
def test_wrong_code_in_how_it_is_called_fails(tmp_path, pid, old, new, check):
    """Right on every call made the earlier way (contiguous int64 tensors by position, distinct objects, every input
    asking for gradients, a fresh module each time, causal calls under 64 queries), wrong on a call a model makes
    otherwise."""
    report = grade(make_impl(tmp_path, {f"{pid}.py": _patched(pid, old, new)}), [pid], sandbox=False)
    assert _check(report, pid, check).status == "failed", [(c.id, c.status) for c in report.problem(pid).checks]


PARTS_MERGED_UNDER_THE_FIRST_MAX = '''import torch


def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):
    B, Hq, d = queries.shape
    block_size, Hkv, dv = v_cache.shape[1], v_cache.shape[2], v_cache.shape[3]
    if Hq % Hkv:
        raise ValueError("Hq is not a multiple of Hkv")
    G = Hq // Hkv
    outs = []
    for b in range(B):
        n = int(context_lens[b])
        blocks = block_tables[b, :(n + block_size - 1) // block_size].long()
        k = k_cache[blocks].reshape(-1, Hkv, d)[:n]
        v = v_cache[blocks].reshape(-1, Hkv, dv)[:n]
        q = queries[b].reshape(Hkv, G, d)
        acc = torch.zeros(Hkv, G, dv, dtype=queries.dtype)
        total = torch.zeros(Hkv, G, 1, dtype=queries.dtype)
        first = None
        for s in range(0, n, 64):  # partitions of 64 tokens, as vLLM's v2 kernel takes them (of 512 there)
            scores = torch.einsum("hgd,nhd->hgn", q, k[s:s + 64]) / d ** 0.5
            m = scores.amax(-1, keepdim=True)
            p = torch.exp(scores - m)
            first = m if first is None else first
            w = torch.exp(m - first)  # merged under the first partition's maximum, not the running one
            acc = acc + w * torch.einsum("hgn,nhv->hgv", p, v[s:s + 64])
            total = total + w * p.sum(-1, keepdim=True)
        outs.append((acc / total if n else acc).reshape(Hq, dv))
    return torch.stack(outs)
'''


def test_partitions_merged_under_the_first_maximum_fail_on_the_long_stability_call(tmp_path):
    """Exact for ordinary scores and for contexts of one partition (the short stability calls): only 1031 tokens of
    scores near 1e4 overflow, and the message says that only the long call does."""
    report = grade(make_impl(tmp_path, {"paged_attention.py": PARTS_MERGED_UNDER_THE_FIRST_MAX}), ["paged_attention"],
                   sandbox=False)
    failed = [c for c in report.problem("paged_attention").checks if c.status == "failed"]
    assert [c.id for c in failed] == ["stability"], [(c.id, c.message) for c in failed]
    assert "long call only" in failed[0].message and "running maximum" in failed[0].message


def test_a_returned_cache_that_views_a_buffer_written_again_fails(tmp_path):
    """A static KV buffer kept on the module, as inference servers preallocate one: under no_grad the cache comes back
    as a view of it, right on every call alone; the next call writes the buffer again, and the cache the first call
    returned (a beam, another conversation) changes under its holder."""
    code = _patched("causal_self_attention", "        if cache is not None:\n            k = torch.cat(",
                    "        if not torch.is_grad_enabled():\n"
                    "            buf = getattr(self, '_buf', None)\n"
                    "            if buf is None or buf.shape[:2] != (2, B) or buf.shape[-2] < P + T or buf.dtype != k.dtype:\n"
                    "                buf = self._buf = k.new_zeros(2, B, self.Hkv, 4096, self.d)\n"
                    "            if cache is not None:\n"
                    "                buf[0, :, :, :P], buf[1, :, :, :P] = cache\n"
                    "            buf[0, :, :, P:P + T], buf[1, :, :, P:P + T] = k, v\n"
                    "            k, v = buf[0, :, :, :P + T], buf[1, :, :, :P + T]\n"
                    "        elif cache is not None:\n            k = torch.cat(")
    report = grade(make_impl(tmp_path, {"causal_self_attention.py": code, "rope.py": (SOLUTIONS / "rope.py").read_text()}),
                   ["causal_self_attention"], sandbox=False)
    failed = [c for c in report.problem("causal_self_attention").checks if c.status == "failed"]
    assert [c.id for c in failed] == ["side_effects"], [(c.id, c.message) for c in failed]
    assert "returned by an earlier call changed" in failed[0].message


@pytest.mark.parametrize("size", [4096, 32768])
def test_a_table_of_max_position_embeddings_fails_on_the_far_call(tmp_path, size):
    """Model code sizes its RoPE table by max_position_embeddings (4096; Mistral's and Qwen2's 32768): right up to
    there, and every call before drawn stops at 8211; the far call (2 tokens after a cache of 32771) does not."""
    code = _patched("causal_self_attention", "        positions = torch.arange(P, P + T, device=x.device)",
                    f"        positions = torch.arange({size}, device=x.device)[P:P + T]  # a table of {size} positions")
    report = grade(make_impl(tmp_path, {"causal_self_attention.py": code, "rope.py": (SOLUTIONS / "rope.py").read_text()}),
                   ["causal_self_attention"], sandbox=False)
    assert _check(report, "causal_self_attention", "parity_float64").status == "failed"
    assert "P=32771" in _check(report, "causal_self_attention", "parity_float64").message


_FIRST_CALL_TABLE = (  # a position table sized by the first call seen (at least 2048 long), then only indexed
    "        positions = torch.arange(P, P + T, device=x.device)",
    "        if not hasattr(self, '_table'):\n"
    "            self.__dict__['_table'] = torch.arange(max(2048, P + T), device=x.device)\n"
    "        positions = self._table[P:P + T]\n"
    "        assert positions.numel() == T, 'past the table'")


@pytest.mark.parametrize("pid", ["causal_self_attention", "latent_attention"])
def test_a_table_sized_by_the_first_call_fails_on_the_far_call_after_a_short_one(tmp_path, pid):
    """Red team 4: a table of positions built on the first call (model code's cache of max(2048, needed) positions)
    and never grown. Every far call used to be its module's first: the table fitted it. Each far call now follows a
    short call on the same module, and the failure names that."""
    files = {f"{pid}.py": _patched(pid, *_FIRST_CALL_TABLE), "rope.py": (SOLUTIONS / "rope.py").read_text()}
    report = grade(make_impl(tmp_path, files), [pid], sandbox=False)
    parity = _check(report, pid, "parity_float64")
    assert parity.status == "failed" and "after a short call on the same" in parity.message, parity.message


@pytest.mark.parametrize("pid, old, new, check", [
    ("scaled_dot_product_attention", "scores.masked_fill(~mask, torch.finfo(scores.dtype).min)",  # BERT's constant
     "scores.masked_fill(~mask, -1e4)", "stability"),
    ("masked_softmax", "torch.arange(scores.shape[-1], device=scores.device)",  # positions rounded past 2048
     "torch.arange(scores.shape[-1], device=scores.device, dtype=torch.float16)", "parity_float64"),
    ("luong_attention", "        if score not in modes:", "        score = score.lower()\n        if score not in modes:",
     "parameters"),  # "DOT" accepted: any other score raises
], ids=["fill_minus_1e4_within_1_of_valid", "float16_positions_past_2048", "score_lowercased"])
def test_wrong_code_that_helper_21_found_fails(tmp_path, pid, old, new, check):
    """Right on every call drawn before: valid scores 10 above a -1e4 fill (it leaked exp(-10)), keys below 2048, and
    scores named in lower case only."""
    report = grade(make_impl(tmp_path, {f"{pid}.py": _patched(pid, old, new)}), [pid], sandbox=False)
    assert _check(report, pid, check).status == "failed", [(c.id, c.status) for c in report.problem(pid).checks]


def test_a_state_written_in_place_under_no_grad_fails(tmp_path):
    """A decoder that saves an allocation in inference: the new h and c copied into the caller's state tensors, which
    the grader's calls under no_grad now give (where its own draws never carry a state)."""
    code = _patched("attentional_decoder", "        h, c = self.cell(torch.cat((y_t, o), dim=-1), (h, c))",
                    "        h_new, c_new = self.cell(torch.cat((y_t, o), dim=-1), (h, c))\n"
                    "        if not torch.is_grad_enabled():\n"
                    "            h.copy_(h_new)\n            c.copy_(c_new)\n"
                    "        h, c = h_new, c_new")
    report = grade(make_impl(tmp_path, {"attentional_decoder.py": code}), ["attentional_decoder"], sandbox=False)
    failed = [c for c in report.problem("attentional_decoder").checks if c.status == "failed"]
    assert [c.id for c in failed] == ["side_effects"], [(c.id, c.message) for c in failed]
    assert "modified its input `state`" in failed[0].message


def test_a_softmax_that_subtracts_the_maximum_only_above_80_fails(tmp_path):
    """NumPy's overflow guarded, its underflow not: every score near -1e4 makes each exp 0 and alpha 0 / 0."""
    code = _patched("numpy_additive_attention", "    e = e - e.max()", "    e = e - e.max() if e.max() > 80 else e")
    report = grade(make_impl(tmp_path, {"numpy_additive_attention.py": code}), ["numpy_additive_attention"], sandbox=False)
    assert _check(report, "numpy_additive_attention", "stability").status == "failed"


@pytest.mark.parametrize("pid", ["additive_attention", "multihead_attention"])
def test_dropout_that_keeps_each_weight_with_probability_p_fails(tmp_path, pid):
    """Dropout written by hand with the comparison the wrong way round (`rand < p` kept): each kept weight is still
    scaled by 1/(1-p), but 70% of them are zeroed at p = 0.3. The share zeroed over the train() calls says so."""
    source = (SOLUTIONS / f"{pid}.py").read_text()
    assert "self.dropout(weights)" in source
    hand = ("(weights * (torch.rand_like(weights) < self.dropout.p) / (1 - self.dropout.p) "
            "if self.training and self.dropout.p > 0 else weights)")
    report = grade(make_impl(tmp_path, {f"{pid}.py": source.replace("self.dropout(weights)", hand)}), [pid],
                   sandbox=False)
    dropout = _check(report, pid, "dropout")
    assert dropout.status == "failed" and "attention weights were zeroed" in dropout.message, dropout.message
    assert "keeps a weight with probability p" in dropout.message
    assert report.problem(pid).score == report.problem(pid).max_score - dropout.max_score


_KEY_CHUNKS = '''"""Keys taken 2048 at a time, the running maximum never updated after the first chunk."""
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    d, Tk = queries.shape[-1], keys.shape[-2]
    m_run = l_run = acc = None
    parts = []
    for s in range(0, Tk, 2048):
        sc = queries @ keys[..., s:s + 2048, :].transpose(-2, -1) / d**0.5
        mk = None if mask is None else (mask[..., s:s + 2048] if mask.shape[-1] != 1 else mask)
        if mk is not None:
            sc = sc.masked_fill(~mk, torch.finfo(sc.dtype).min)
        if m_run is None:
            m_run = sc.amax(-1, keepdim=True)
        p = torch.exp(sc - m_run) * (1 if mk is None else mk)
        parts.append(p)
        l_run = p.sum(-1, keepdim=True) if l_run is None else l_run + p.sum(-1, keepdim=True)
        acc = p @ values[..., s:s + 2048, :] if acc is None else acc + p @ values[..., s:s + 2048, :]
    denom = torch.where(l_run > 0, l_run, torch.ones_like(l_run))
    return acc / denom, torch.cat(parts, -1) / denom
'''

_QUERY_BLOCKS = '''"""Queries taken 128 at a time, each block's offset into the mask lost."""
import torch


def scaled_dot_product_attention(queries, keys, values, mask=None):
    outs, ws = [], []
    for s in range(0, queries.shape[-2], 128):
        q = queries[..., s:s + 128, :]
        mk = mask[..., :q.shape[-2], :] if mask is not None and mask.dim() >= 2 and mask.shape[-2] != 1 else mask
        scores = q @ keys.transpose(-2, -1) / q.shape[-1] ** 0.5
        if mk is None:
            w = torch.softmax(scores, dim=-1)
        else:
            w = torch.softmax(scores.masked_fill(~mk, torch.finfo(scores.dtype).min), dim=-1) * mk
        outs.append(w @ values)
        ws.append(w)
    return torch.cat(outs, -2), torch.cat(ws, -2)
'''


@pytest.mark.parametrize("code", [_KEY_CHUNKS, _QUERY_BLOCKS], ids=["keys_by_2048", "queries_by_128"])
def test_tiles_wrong_only_past_the_usual_draws_fail_the_stability_check(tmp_path, code):
    """Tiled code right on every call up to 1031 keys and 67 queries (the long calls), wrong past 2048 keys (a stale
    running maximum overflows once a later chunk's scores are larger) or past 128 queries (a block's offset lost): the
    stability check's far (8209 keys) and tall (257 queries) calls catch both."""
    pid = "scaled_dot_product_attention"
    report = grade(make_impl(tmp_path, {f"{pid}.py": code}), [pid], sandbox=False)
    assert _check(report, pid, "stability").status == "failed"
    assert report.problem(pid).score == report.problem(pid).max_score - _check(report, pid, "stability").max_score
