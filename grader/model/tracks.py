"""The tracks, in order: (name, one line). A spec's `track` must be one of these names."""

TRACKS = (
    ("warm-up", "NumPy first, then the masked softmax every module reuses"),
    ("scoring", "additive (Bahdanau), then Luong's four scoring functions"),
    ("seq2seq", "attention between two sequences, as seq2seq models use it: local attention, an attentional decoder "
                "with input feeding, cross-attention with a memory cache"),
    ("masking", "boolean masks over any leading dims: scaled dot-product attention"),
    ("multi-head", "several scorers over the same values"),
    ("transformer", "Transformer multi-head attention"),
    ("LLM", "the attention of today's decoders: RoPE, grouped-query heads, tiling, the backward pass, a KV cache"),
    ("serving", "the attention of serving and long contexts, where the point is what is not computed: a sliding "
                "window with sinks, linear biases (ALiBi), latent attention, a paged KV cache, linear attention"),
    ("kernels", "attention as GPU kernels in Triton, graded on any machine through Triton's interpreter: values, memory "
                "traffic, bounds and the on-chip budget"),
    ("memory", "the follow-up question: the same result under a memory bound"),
)
