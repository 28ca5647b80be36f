"""Spec: one decoding step over a paged KV cache (vLLM's PagedAttention), section 20 of the serving stage."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem
from ._common import LLM_BANNED, not_dividing, scale_scores

K = "k = k_cache[blocks].reshape(-1, Hkv, d)[:n]"
V = "v = v_cache[blocks].reshape(-1, Hkv, dv)[:n]"
Q = "q = queries[b].reshape(Hkv, G, d)"
SCORES = 'scores = torch.einsum("hgd,nhd->hgn", q, k) / d**0.5'
OUT = 'outs.append(torch.einsum("hgn,nhv->hgv", weights, v).reshape(Hq, dv))'
BLOCKS = "blocks = block_tables[b, :(n + block_size - 1) // block_size].long()"

MISTAKES = (
    Mistake("slot_swapped", "token t read from block t % n_blocks, slot t // n_blocks (block and slot index swapped)",
            ((K, "k = k_cache[blocks].transpose(0, 1).reshape(-1, Hkv, d)[:n]"),
             (V, "v = v_cache[blocks].transpose(0, 1).reshape(-1, Hkv, dv)[:n]")),
            explain="A block holds block_size consecutive tokens: token t is slot t % block_size of the block "
                    "block_tables[b, t // block_size]. Reading the blocks column by column takes the tokens in another "
                    "order and, past the first block, other tokens (and unused slots) altogether.",
            hint="k = k_cache[block_tables[b, :nb]].reshape(nb * block_size, Hkv, d)[:n]: blocks in table order, "
                 "slots in order inside each."),
    Mistake("mask_after_values", "the whole table gathered and its unused slots masked after the values were multiplied "
            "in (0 * NaN is NaN)",
            ((BLOCKS, "blocks = block_tables[b].long() if n else block_tables[b, :0].long()"),
             (K, "k = k_cache[blocks].reshape(-1, Hkv, d)"), (V, "v = v_cache[blocks].reshape(-1, Hkv, dv)"),
             (SCORES, 'scores = (torch.einsum("hgd,nhd->hgn", q, k) / d**0.5).masked_fill('
                      'torch.arange(k.shape[0], device=k.device) >= n, float("-inf"))')),
            explain="The slots past context_lens in the last block may hold anything, NaN and inf included (freed "
                    "memory, another sequence's data). A weight of 0 does not cancel them: 0 * NaN and 0 * inf are NaN. "
                    "Only tokens that were never read cannot reach the output.",
            hint="Slice the valid tokens first (k[:n], v[:n]), then multiply; never rely on a zero weight."),
    Mistake("last_block_dropped", "the last, partial block of a sequence dropped (context_lens // block_size blocks)",
            ((BLOCKS, "blocks = block_tables[b, :n // block_size].long()"),),
            explain="A sequence of n tokens spans ceil(n / block_size) blocks: the last one is partly filled when "
                    "block_size does not divide n, and n // block_size leaves it out (and its newest tokens with it).",
            hint="nb = (n + block_size - 1) // block_size blocks; then keep the first n tokens."),
    Mistake("whole_batch_gathered", "every sequence's blocks gathered to the longest table's length at once",
            ((K, "k = k_cache[block_tables.long()][b, :blocks.shape[0]].reshape(-1, Hkv, d)[:n]"),),
            explain="k_cache[block_tables] builds (B, max_blocks, block_size, Hkv, d): every sequence padded to the "
                    "longest table, the copy that paging exists to avoid. The values are right; the memory is not.",
            hint="Gather one sequence's own blocks at a time (or one block column across the batch)."),
    Mistake("head_mod_mapping", "query head n paired with key/value head n % Hkv instead of n // G",
            ((Q, "q = queries[b].reshape(G, Hkv, d).transpose(0, 1)"),
             (OUT, 'outs.append(torch.einsum("hgn,nhv->ghv", weights, v).reshape(Hq, dv))')),
            explain="Groups are consecutive, as in grouped-query attention: query heads 0..G-1 read key/value head 0, "
                    "G..2G-1 head 1 (head n reads n // G, vLLM's and enable_gqa's convention).",
            hint="queries[b].reshape(Hkv, G, d): the G query heads of each key/value head."),
    Mistake("no_scaling", "scores not scaled by 1/sqrt(d)",
            ((SCORES, 'scores = torch.einsum("hgd,nhd->hgn", q, k)'),),
            explain="Scores are q . k / sqrt(d), as in every attention of the LLM track.",
            hint="scores = q . k / sqrt(d), d = queries.shape[-1]."),
    Mistake("scale_by_dv", "scaled by the values' feature size instead of d",
            ((SCORES, 'scores = torch.einsum("hgd,nhd->hgn", q, k) / dv**0.5'),),
            explain="d is the size of the vectors being dotted (queries and keys), not of the values.",
            hint="d = queries.shape[-1]."),
    Mistake("newest_token_left_out", "the newest token left out (context_lens - 1 tokens attended)",
            (("n = int(context_lens[b])", "n = max(int(context_lens[b]) - 1, 0)"),),
            explain="The query's own token is already in the cache and counted in context_lens: a sequence of n "
                    "tokens attends all n of them, its own included.",
            hint="Attend tokens 0 .. context_lens[b] - 1."),
    Mistake("softmax_over_heads", "softmax over the query heads instead of the tokens",
            (("weights = torch.softmax(scores, dim=-1)", "weights = torch.softmax(scores, dim=1)"),),
            explain="Each query head distributes its attention over the sequence's tokens: the softmax runs over the "
                    "token axis.",
            hint="Softmax over the tokens (the last axis of (Hkv, G, n))."),
    Mistake("query_axis_kept", "output (B, Hq, 1, dv): the query axis of length 1 kept",
            ((OUT, 'outs.append(torch.einsum("hgn,nhv->hgv", weights, v).reshape(Hq, 1, dv))'),),
            explain="One query per sequence: the queries are (B, Hq, d) and the output (B, Hq, dv). Code written for "
                    "(B, H, Tq, d) attention (F.scaled_dot_product_attention's layout) keeps a query axis of length 1.",
            hint="Return (B, Hq, dv): squeeze the query axis, or never add it."),
    Mistake("queries_scaled_in_place", "the queries scaled in place (q *= d ** -0.5 on a view of the input)",
            ((Q, Q + "\n        q *= d**-0.5"), (SCORES, 'scores = torch.einsum("hgd,nhd->hgn", q, k)')),
            explain="queries[b].reshape(...) is a view of the caller's tensor: scaling it in place changes the caller's "
                    "queries (and autograd refuses an in-place change of a view of a leaf that needs its gradient).",
            hint="q = queries[b].reshape(Hkv, G, d) * d ** -0.5 makes a new tensor; or divide the scores."),
    Mistake("heads_not_checked", "Hq not divisible by Hkv accepted", (("    if Hq % Hkv:\n", "    if False:\n"),),
            explain="With Hq % Hkv != 0 the query heads cannot be grouped evenly; the contract raises ValueError.",
            hint="if Hq % Hkv: raise ValueError(...)."),
)


def _fit(cfg, variant):
    """Hq = Hkv * G, d = dq, and a table of Tk // block_size + 1 entries (so that Tk keys fit with a block to spare)."""
    cfg = {**cfg, **variant}
    return {**cfg, "Hq": cfg["Hkv"] * cfg["G"], "d": cfg["dq"], "dk": cfg["dq"],
            "max_blocks": cfg["Tk"] // cfg["block_size"] + 1}


def _lens(cfg, gen) -> list:
    """Sequence lengths: the first a full table, the second ending inside a block; the last 0 when B >= 3; "padded":
    the others short. The one sequence of a B = 1 call with Tq > 1 (config 3) is empty: a batch with no token at
    all, whose output takes its dtype from the queries alone."""
    B, full = cfg["B"], cfg["max_blocks"] * cfg["block_size"]
    if cfg.get("lens") == "padded":  # one sequence much longer than the others (the memory calls)
        return [full] + [1 + (3 * b) % (2 * cfg["block_size"]) for b in range(1, B)]
    if B == 1 and cfg["Tq"] > 1 and cfg.get("lens") is None:
        return [0]
    lens = [full] + torch.randint(1, full + 1, (B - 1,), generator=gen).tolist()
    if B >= 2 and cfg["block_size"] > 1 and lens[1] % cfg["block_size"] == 0:
        lens[1] -= 1  # the second sequence ends inside a block: its last block has unused slots, read by no one
    return lens[:-1] + [0] if B >= 3 else lens


def _inputs(cfg, gen):
    """queries (B, Hq, d); caches of N_blocks blocks (two more than the sequences need, free), each sequence's blocks
    at random places, the first two sequences sharing their first block where both fill two; table entries past a
    sequence's last block name random blocks; unused slots hold NaN (a third of them) or values ~100 times larger
    than the used ones: every check, gradients included, sees storage that must not be read."""
    B, Hq, Hkv, d, dv, bs = cfg["B"], cfg["Hq"], cfg["Hkv"], cfg["dq"], cfg["dv"], cfg["block_size"]
    lens = _lens(cfg, gen)
    needed = [(n + bs - 1) // bs for n in lens]
    N = sum(needed) + 2
    places = torch.randperm(N, generator=gen)
    tables = torch.randint(0, N, (B, cfg["max_blocks"]), generator=gen)
    at = 0
    for b, nb in enumerate(needed):
        tables[b, :nb] = places[at:at + nb]
        at += nb
    if B >= 2 and min(needed[:2]) >= 2 and cfg.get("lens") != "padded":  # a shared prefix: sequence 1's first block
        tables[1, 0] = tables[0, 0]  # is sequence 0's (its own is left free)
    used = _used(tables, lens, N, bs)
    caches = []
    for width in (d, dv):
        c = torch.randn(N, bs, Hkv, width, generator=gen, dtype=torch.float64)
        junk = torch.where(torch.arange(N * bs).view(N, bs, 1, 1) % 3 == 0, float("nan"), 100 * c)  # NaN in a third
        caches.append(torch.where(used[:, :, None, None], c, junk))
    index = getattr(torch, cfg.get("index", "int64"))
    q = torch.randn(B, Hq, d, generator=gen, dtype=torch.float64)
    return [q, *caches, tables.to(index), torch.tensor(lens, dtype=index)]


def _used(tables, lens, N, bs):
    """(N_blocks, block_size) bool: the slots some sequence's valid tokens occupy."""
    used = torch.zeros(N, bs, dtype=torch.bool)
    for b, n in enumerate(lens):
        t = torch.arange(int(n))
        used[tables[b, t // bs].long(), t % bs] = True
    return used


def gathered(args):
    """Each sequence's valid keys and values, contiguous: [(k (n, Hkv, d), v (n, Hkv, dv))], gathered token by token."""
    _, k_cache, v_cache, tables, lens = args[:5]
    bs = k_cache.shape[1]
    out = []
    for b, n in enumerate(lens.tolist()):
        t = torch.arange(n, device=tables.device)
        blocks, slots = tables[b, t // bs].long(), t % bs
        out.append((k_cache[blocks, slots], v_cache[blocks, slots]))
    return out


def _oracle(call):
    """each sequence gathered token by token into a padded (B, Hkv, L, d) K/V, then F.scaled_dot_product_attention
    with enable_gqa=True and a key-padding mask; a sequence of length 0 gives 0"""
    q, lens = call["args"][0], call["args"][4]
    kv = gathered(call["args"])
    L = max(1, max(k.shape[0] for k, _ in kv))
    pad = lambda t: torch.cat((t, t.new_zeros(L - t.shape[0], *t.shape[1:]))).transpose(0, 1)  # noqa: E731
    K, V = torch.stack([pad(k) for k, _ in kv]), torch.stack([pad(v) for _, v in kv])
    mask = (torch.arange(L) < lens.long()[:, None])[:, None, None, :]  # (B, 1, 1, L)
    out = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], K, V, attn_mask=mask, enable_gqa=True)[:, :, 0]
    return [torch.where((lens > 0)[:, None, None], out, torch.zeros_like(out))]


def _amplify(args, state, cfg):
    """Scale queries and caches so that the largest |q . k| / sqrt(d) over the valid tokens is 1e4."""
    q, G = args[0], args[0].shape[1] // args[1].shape[2]
    top = max((((q[b].reshape(-1, G, q.shape[-1]) @ k.permute(1, 2, 0)).abs().max().item() if k.numel() else 0.0)
               for b, (k, _) in enumerate(gathered(args))), default=0.0) / q.shape[-1] ** 0.5
    if top > 0:
        scale_scores(args, SCORE_BOUND / top)


def _unused_to_nan(cfg, args, gen):
    """NaN in half the unused slots and +-inf in the others, in both caches; nothing else changes."""
    q, k_cache, v_cache, tables, lens = args
    used = _used(tables, lens.tolist(), k_cache.shape[0], k_cache.shape[1])
    junk = torch.where(torch.rand(used.shape, generator=gen) < 0.5, float("nan"), float("inf"))
    junk = junk * torch.where(torch.rand(used.shape, generator=gen) < 0.5, 1.0, -1.0)
    fill = lambda c: torch.where(used[:, :, None, None], c, junk[:, :, None, None].to(c.dtype))  # noqa: E731
    return [q, fill(k_cache), fill(v_cache), tables, lens]


def _permuted(cfg, args, gen):
    """The physical blocks in another order, the tables renumbered with them."""
    q, k_cache, v_cache, tables, lens = args
    order = torch.randperm(k_cache.shape[0], generator=gen)  # new block p holds old block order[p]
    new_place = torch.argsort(order)
    return [q, k_cache[order], v_cache[order], new_place[tables.long()].to(tables.dtype), lens]


RELATIONS = (
    {"id": "blocks_permuted", "change": "the physical blocks' order (and the block tables with it)",
     "transform": _permuted,
     "says": "where a block sits in the cache does not matter, only what the table says: permuting the physical blocks "
             "and renumbering the tables the same way changes nothing"},
    {"id": "unused_nan", "change": "every unused slot and block (now NaN, inf or -inf)", "transform": _unused_to_nan,
     "says": "storage no valid token occupies may hold anything, NaN and inf included, and must not reach the output: "
             "select the valid tokens before multiplying (0 * NaN is NaN)"},
)


def _memory_fit(cfg):
    """Padded tables: one sequence of 16 blocks, three of 1 or 2; N_blocks = 22 < B * max_blocks = 64, min(B,
    max_blocks) = 4 > G = 2: the whole batch gathered (2048 elements) exceeds the bound (1024)."""
    return {**cfg, "B": 4, "Hkv": 1, "G": 2, "Hq": 2, "dq": 8, "dk": 8, "d": 8, "dv": 8, "block_size": 4,
            "max_blocks": 16, "lens": "padded"}


def _memory(cfg, args):
    """max(S, max(B, max_blocks) * block_size * Hq * max(d, dv)) elements, S the largest input or output."""
    S = max(max(a.numel() for a in args), cfg["B"] * cfg["Hq"] * cfg["dv"])
    return [({}, max(S, max(cfg["B"], cfg["max_blocks"]) * cfg["block_size"] * cfg["Hq"] * max(cfg["dq"], cfg["dv"])))]


BACKSTOP = {
    "dims": {"B": 64, "Hkv": 1, "G": 1, "Hq": 1, "dq": 64, "dk": 64, "d": 64, "dv": 64, "block_size": 16,
             "max_blocks": 256, "Tq": 1, "Tk": 4095, "lens": "padded"},
    "args": {},
    "allowed": lambda cfg, args: 256 * 16 * 64,
    "resident_kb": 64 * 1024,
    "held_kb": 96 * 1024,
}
"""A float32 step for 64 sequences, one of 4096 tokens and 63 of at most 32, measured from outside the worker
(run/cgroup.py): the whole batch gathered to the longest table takes 67 MB for the keys alone (and as much for the
values); one sequence's blocks at a time take 1 MB."""


PROBLEM = Problem(
    id="paged_attention",
    title="Paged attention",
    summary="One decoding step over a paged KV cache: each sequence's tokens in blocks a table names, read in place.",
    symbol="paged_attention",
    points={"shapes": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "metamorphic": 2, "gradients": 1,
            "stability": 1, "side_effects": 1, "memory": 2, "value_errors": 1, "capabilities": 1, "cuda": 1,
            "cuda_half": 1},
    hints=(
        "Token t of sequence b is slot t % block_size of block block_tables[b, t // block_size]; a sequence of n "
        "tokens spans ceil(n / block_size) blocks, the last one maybe partly filled. Query head n reads key/value "
        "head n // G.",
        "One sequence at a time: its blocks k_cache[block_tables[b, :nb]] reshaped to (nb * block_size, Hkv, d) are "
        "its tokens in order; keep the first n. Then attention as in grouped-query attention, for one query.",
        "Slice the n valid tokens before any product: the unused slots may hold NaN or inf and 0 * NaN is NaN. A "
        "sequence of length 0 gives an output of 0. Stack the sequences' outputs to (B, Hq, dv).",
    ),
    methods=(
        Method(
            signature="def paged_attention(queries, k_cache, v_cache, block_tables, context_lens):",
            statement=(
                "One new token per sequence, already in the cache. Token t (0 <= t < context_lens[b]) of sequence b\n"
                "is k_cache[block_tables[b, t // block_size], t % block_size] (likewise v_cache). Query head n uses\n"
                "key/value head n // G, G = Hq // Hkv (Hq % Hkv != 0 raises ValueError); scale 1/sqrt(d).\n"
                "output[b, n] = softmax(q k^T / sqrt(d)) v over the sequence's context_lens[b] tokens, 0 when it is 0.\n"
                "Unused storage (slots past context_lens[b], blocks past the sequence's last) may hold anything, NaN\n"
                "and inf included, and must not affect the result. No tensor an operation allocates has more than\n"
                "max(S, max(B, max_blocks) * block_size * Hq * max(d, dv)) elements (S the largest input or output):\n"
                "never gather the whole batch to the longest table. Do not call F.scaled_dot_product_attention."
            ),
            args=(Arg("queries", "(B, Hq, d)", "query"),
                  Arg("k_cache", "(N_blocks, block_size, Hkv, d)", "tensor"),
                  Arg("v_cache", "(N_blocks, block_size, Hkv, dv)", "tensor"),
                  Arg("block_tables", "(B, max_blocks) int32 or int64: each sequence's blocks, in order", "tensor"),
                  Arg("context_lens", "(B,) int32 or int64: each sequence's number of tokens", "tensor")),
            returns=(Out("output", "(B, Hq, dv)", "values"),),
        ),
    ),
    variants=({"Hkv": 2, "G": 2, "block_size": 4, "index": "int64"}, {"Hkv": 1, "G": 3, "block_size": 1, "index": "int32"},
              {"Hkv": 3, "G": 1, "block_size": 2, "index": "int64"}),
    fit=_fit,
    inputs=_inputs,
    traced=False,  # the learner chooses how to walk the blocks: its tensors are no stages of the reference's
    options={  # each check's options (the check units in judge/checks/ declare them)
        "memory": {
            "calls": _memory,
            "fit": _memory_fit,
            "backstop": BACKSTOP,
            "words": {"bound": "max(S, max(B, max_blocks) * block_size * Hq * max(d, dv))",
                      "tensor": "every sequence's blocks gathered to the longest table's length",
                      "advice": "Gather one sequence's own blocks at a time (or one block column across the batch), "
                                "never the whole batch padded to the longest table"},
        },
        "metamorphic": {"relations": RELATIONS},
        "stability": {"amplify": _amplify, "long": True},
        "value_errors": {"calls": lambda cfg: tuple(
            ({"k_cache": torch.zeros(cfg["B"] * cfg["max_blocks"] + 2, cfg["block_size"], h, cfg["dq"], dtype=torch.float64),
              "v_cache": torch.zeros(cfg["B"] * cfg["max_blocks"] + 2, cfg["block_size"], h, cfg["dv"], dtype=torch.float64)},
             why, ()) for h, why in not_dividing(cfg["Hq"]))},
        "oracle": {"call": _oracle},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    track="serving",
    after=("grouped_query_attention",),
)
