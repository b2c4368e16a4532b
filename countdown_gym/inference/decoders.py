"""Incremental decoders for the multi-turn rollout engine: a model's forward pass over ragged token blocks.

At every step each row (one episode) feeds a block of one or more tokens continuing its own sequence and gets back
the logits of the block's last token. A row may feed one token without keeping it (``advance=False``: written past
its end and overwritten later, so a waiting row changes nothing). :class:`DirectDecoder` computes Llama-family models
(``llama``, ``qwen2``) from their own weights (fused matrices, a preallocated per-row KV cache, no padding; on CUDA,
one-token steps replayed as CUDA graphs), what the Hugging Face forward computes; :class:`HFDecoder` runs any other
causal LM through its own ``forward`` and KV cache; :func:`make_decoder` picks one.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch
import torch.nn.functional as F

DIRECT_MODEL_TYPES = ("llama", "qwen2")
_CHUNK = 128  # the per-row cache grows by this many positions at a time
GRAPH_BUCKET = 64
"""Graphed decode steps read the cache up to a multiple of this many positions (masked beyond each row's end)."""
GRAPH_AFTER = 2
"""A (rows, cache length) shape is captured as a graph on its this-many-th one-token step (eager until then)."""


@dataclass
class Step:
    """One step's input, one block per row: ``last[r]``, row r's last (or only) token; ``prefix``, the tokens before
    it of the rows feeding more than one (``prefix_rows[i]`` names the row of ``prefix[i]``, rows increasing);
    ``advance[r]`` False for a row feeding its token without keeping it. ``block_rows`` (the rows with a prefix)
    and ``width`` (their longest prefix), when the caller knows them, spare a read of the device.
    """

    last: torch.Tensor
    advance: torch.Tensor
    prefix: torch.Tensor | None = None
    prefix_rows: torch.Tensor | None = None
    block_rows: torch.Tensor | None = None
    width: int = 0

    def layout(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(counts, slot)``: each row's prefix length, and each prefix token's place in its row's prefix."""
        counts = torch.zeros(rows, dtype=torch.long, device=self.last.device)
        counts.scatter_add_(0, self.prefix_rows, torch.ones_like(self.prefix_rows))  # bincount without a device read
        start = torch.cumsum(counts, 0) - counts
        return counts, torch.arange(self.prefix.numel(), device=counts.device) - start[self.prefix_rows]


class DirectDecoder:
    """A Llama-family model's decode and prefill, with a preallocated per-row KV cache (see the module docstring)."""

    def __init__(self, model: Any, rows: int, capacity: int, graphs: bool | None = None) -> None:
        """``graphs``: replay one-token steps through static buffers, as CUDA graphs on CUDA (default: on CUDA
        only; ``True`` on the CPU runs the same static-buffer path eagerly, which is how it is tested here)."""
        cfg = model.config
        core = model.model
        self.device = next(model.parameters()).device
        self.dtype = core.embed_tokens.weight.dtype
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.embed = core.embed_tokens.weight
        self.rotary = core.rotary_emb
        self.norm = core.norm  # the model's own RMS norms and rotation: what its forward computes
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        self.rope = apply_rotary_pos_emb
        self.lm_head = model.lm_head.weight
        self.layers = []
        with torch.no_grad():
            for layer in core.layers:
                att, mlp = layer.self_attn, layer.mlp
                qkv_b = None if att.q_proj.bias is None else torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias])
                self.layers.append({
                    "ln1": layer.input_layernorm, "ln2": layer.post_attention_layernorm,
                    "qkv": torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]).t().contiguous(),
                    "qkv_b": qkv_b, "o": att.o_proj.weight.t().contiguous(),
                    "o_b": att.o_proj.bias,
                    "gu": torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).t().contiguous(),
                    "down": mlp.down_proj.weight.t().contiguous(),
                })
        self.rows = rows
        self.length = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.graphs = self.device.type == "cuda" if graphs is None else graphs
        self._static: dict[tuple[int, int], _StaticStep] = {}
        self._seen: dict[tuple[int, int], int] = {}
        self.captured = 0
        """Graphed shapes captured so far."""
        self.cap = 0
        empty = torch.zeros((rows, self.kv_heads, 0, self.head_dim), dtype=self.dtype, device=self.device)
        self.k: list[torch.Tensor] = [empty] * len(self.layers)
        self.v: list[torch.Tensor] = [empty] * len(self.layers)
        self._grow(min(_CHUNK, capacity))  # grown as rows get longer

    @staticmethod
    def supports(model: Any) -> bool:
        """Whether ``model`` is a Llama-family causal LM this decoder computes exactly."""
        cfg = getattr(model, "config", None)
        if cfg is None or getattr(cfg, "model_type", None) not in DIRECT_MODEL_TYPES:
            return False
        core = getattr(model, "model", None)
        if core is None or not hasattr(core, "rotary_emb") or not hasattr(model, "lm_head"):
            return False
        if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "mlp_bias", False):
            return False
        if getattr(cfg, "use_sliding_window", False) or getattr(cfg, "partial_rotary_factor", 1.0) != 1.0:
            return False
        layer = core.layers[0]
        return not any(hasattr(layer.self_attn, name) for name in ("q_norm", "k_norm"))

    def _grow(self, need: int) -> None:
        cap = -(-max(need, self.cap + _CHUNK) // _CHUNK) * _CHUNK
        more = (0, 0, 0, cap - self.cap)  # zeros after the positions held
        self.k = [F.pad(t, more) for t in self.k]
        self.v = [F.pad(t, more) for t in self.v]
        self.cap = cap
        self._static.clear()  # the graphs read the old cache

    def reset(self, rows: torch.Tensor) -> None:
        """Empty these rows (a new episode starts there)."""
        self.length[rows] = 0

    def select(self, keep: torch.Tensor) -> None:
        """Keep only these rows, in this order."""
        self.k = [t.index_select(0, keep) for t in self.k]
        self.v = [t.index_select(0, keep) for t in self.v]
        self.length = self.length.index_select(0, keep)
        self.rows = int(keep.numel())
        self._static.clear()
        self._seen.clear()

    @torch.no_grad()
    def forward(self, step: Step, max_len: int) -> torch.Tensor:
        """Feed ``step``; the logits of every row's last token (``[rows, vocab]``, float32). ``max_len`` bounds every
        row's length after this step (the engine knows it without reading the device)."""
        if max_len > self.cap:
            self._grow(max_len)
        if self.graphs and (step.prefix is None or step.prefix.numel() == 0):
            bucket = min(self.cap, -(-max_len // GRAPH_BUCKET) * GRAPH_BUCKET)
            key = (self.rows, bucket)
            static = self._static.get(key)
            if static is None:
                self._seen[key] = seen = self._seen.get(key, 0) + 1
                if seen >= GRAPH_AFTER:
                    try:
                        static = self._static[key] = _StaticStep(self, bucket)
                    except RuntimeError as exc:  # a capture the device refuses: this decoder runs eagerly
                        warnings.warn(f"CUDA graphs off for this decoder ({exc})", RuntimeWarning, stacklevel=2)
                        self.graphs = False
                        return self._forward(step, max_len)
                    self.captured += 1
            if static is not None:
                return static(step)
        return self._forward(step, max_len)

    def _forward(self, step: Step, max_len: int) -> torch.Tensor:
        rows, device = self.rows, self.device
        n_pre = 0 if step.prefix is None else int(step.prefix.numel())
        length = self.length
        ar = torch.arange(rows, device=device)
        if n_pre:
            pre_rows = step.prefix_rows
            counts, slot = step.layout(rows)
            pre_pos = length[pre_rows] + slot
            last_pos = length + counts
            tokens = torch.cat([step.prefix, step.last])
            tok_rows = torch.cat([pre_rows, ar])
            positions = torch.cat([pre_pos, last_pos])
        else:
            counts = None
            last_pos = length
            tokens, tok_rows, positions = step.last, ar, last_pos
        x = self.embed[tokens]
        cos, sin = (t[0] for t in self.rotary(x[None], positions[None]))
        keys = torch.arange(max_len, device=device)  # attention reads the cache up to the longest row only
        last_mask = (keys[None, :] <= last_pos[:, None])[:, None, None, :]
        if n_pre:
            s_rows = step.block_rows if step.block_rows is not None else torch.nonzero(counts, as_tuple=False)[:, 0]
            width = step.width or int(counts.max())
            s_index = torch.searchsorted(s_rows, pre_rows)
            q_pos = torch.full((s_rows.numel(), width), -1, dtype=torch.long, device=device)
            q_pos[s_index, slot] = pre_pos
            pre_mask = (keys[None, None, :] <= q_pos[:, :, None]) & (q_pos[:, :, None] >= 0)
            pre_mask[:, :, 0] |= q_pos < 0  # padding queries see one key, so their (unused) output stays finite
            pre_mask = pre_mask[:, None]
        gqa = self.kv_heads != self.heads
        h_dim, d = self.heads, self.head_dim
        nq, nk = h_dim * d, self.kv_heads * d
        for li, layer in enumerate(self.layers):
            h = layer["ln1"](x)
            qkv = h @ layer["qkv"]
            if layer["qkv_b"] is not None:
                qkv = qkv + layer["qkv_b"]
            q, k = self.rope(qkv[:, :nq].view(-1, h_dim, d), qkv[:, nq : nq + nk].view(-1, self.kv_heads, d), cos, sin)
            v = qkv[:, nq + nk :].view(-1, self.kv_heads, d)
            self.k[li][tok_rows, :, positions] = k
            self.v[li][tok_rows, :, positions] = v
            kc, vc = self.k[li][:, :, :max_len], self.v[li][:, :, :max_len]
            att = torch.empty((tokens.numel(), h_dim, d), dtype=x.dtype, device=device)
            q_last = q[n_pre:].unsqueeze(2)  # [rows, heads, 1, d]
            if self.device.type == "cuda":  # one query a row: its fused kernels pad it to a tile of 64
                att[n_pre:] = one_query_attention(q_last, kc, vc, last_mask)[:, :, 0]
            else:
                att[n_pre:] = F.scaled_dot_product_attention(q_last, kc, vc, attn_mask=last_mask, enable_gqa=gqa)[:, :, 0]
            if n_pre:
                qp = torch.zeros((s_rows.numel(), width, h_dim, d), dtype=x.dtype, device=device)
                qp[s_index, slot] = q[:n_pre]
                # the rows' whole cache, then its first max_len positions: index_select copies a contiguous
                # tensor about twice as fast as the strided view kc (measured on the CPU), though it copies more
                kb = self.k[li].index_select(0, s_rows)[:, :, :max_len]
                vb = self.v[li].index_select(0, s_rows)[:, :, :max_len]
                out = F.scaled_dot_product_attention(qp.transpose(1, 2), kb, vb, attn_mask=pre_mask, enable_gqa=gqa)
                att[:n_pre] = out.transpose(1, 2)[s_index, slot]
            o = att.reshape(-1, nq) @ layer["o"]
            if layer["o_b"] is not None:
                o = o + layer["o_b"]
            x = x + o
            h = layer["ln2"](x)
            gate, up = (h @ layer["gu"]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ layer["down"]
        if n_pre:
            self.length.copy_(torch.where(step.advance, last_pos + 1, length + counts))
        else:
            self.length.add_(step.advance.long())  # in place: a graph captured this tensor
        last = self.norm(x[n_pre:])
        return (last @ self.lm_head.t()).float()


class _StaticStep:
    """A direct decoder's one-token step at one (rows, cache length) shape, fed through static input buffers and
    replayed as a CUDA graph (on another device, run eagerly from the same buffers)."""

    def __init__(self, dec: DirectDecoder, bucket: int) -> None:
        self.dec, self.bucket = dec, bucket
        self.last = torch.zeros(dec.rows, dtype=torch.long, device=dec.device)
        self.advance = torch.zeros(dec.rows, dtype=torch.bool, device=dec.device)
        self.step = Step(last=self.last, advance=self.advance)
        self.graph = None
        if dec.device.type == "cuda":
            # Warm up on a side stream, as capture requires. With no row advancing, the step writes keys and values
            # only one past each row's end, where the next real step writes its own: nothing of the rows changes.
            side = torch.cuda.Stream(dec.device)
            side.wait_stream(torch.cuda.current_stream(dec.device))
            with torch.cuda.stream(side):
                dec._forward(self.step, bucket)
            torch.cuda.current_stream(dec.device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.logits = dec._forward(self.step, bucket)

    def __call__(self, step: Step) -> torch.Tensor:
        self.last.copy_(step.last)
        self.advance.copy_(step.advance)
        if self.graph is None:
            return self.dec._forward(self.step, self.bucket)
        self.graph.replay()
        return self.logits.clone()  # the next replay overwrites the graph's own output


def one_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention of one query per row (``q``: ``[rows, heads, 1, d]``; ``k``, ``v``: ``[rows, kv_heads, len, d]``, a
    query head h reading key head ``h // (heads // kv_heads)``; ``mask``: ``[rows, 1, 1, len]``, True where a key
    is seen) as two batched matrix products: ``scaled_dot_product_attention`` computes the same."""
    rows, heads, _, d = q.shape
    kv_heads = k.shape[1]
    qg = q.reshape(rows, kv_heads, heads // kv_heads, d)  # the query heads of each key head, side by side
    scores = torch.matmul(qg, k.transpose(-1, -2)) * d**-0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(scores.softmax(-1), v).reshape(rows, heads, 1, d)


class HFDecoder:
    """Any Hugging Face causal LM through its own ``forward`` and KV cache (see the module docstring)."""

    def __init__(self, model: Any, rows: int, cache_arg: str) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.rows = rows
        self.cache_arg = cache_arg
        from transformers.cache_utils import Cache

        self.cache = Cache(layer_class_to_replicate=_growing_layer_class())
        self.attn = torch.zeros((rows, 0), dtype=torch.long, device=self.device)
        self.position = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.pad = 0

    def reset(self, rows: torch.Tensor) -> None:
        self.attn[rows] = 0
        self.position[rows] = 0

    def select(self, keep: torch.Tensor) -> None:
        self.attn = self.attn.index_select(0, keep)
        self.position = self.position.index_select(0, keep)
        for layer in self.cache.layers:
            layer.select(keep)
        self.rows = int(keep.numel())

    @torch.no_grad()
    def forward(self, step: Step, max_len: int) -> torch.Tensor:
        rows, device = self.rows, self.device
        if step.prefix is None or step.prefix.numel() == 0:
            counts = torch.zeros(rows, dtype=torch.long, device=device)
            width = 1
        else:
            counts, slot = step.layout(rows)
            width = (step.width or int(counts.max())) + 1
        n = counts + 1
        ids = torch.full((rows, width), self.pad, dtype=torch.long, device=device)
        mask = (torch.arange(width, device=device)[None, :] >= (width - n)[:, None]).long()
        ids[:, -1] = step.last
        if width > 1:
            ids[step.prefix_rows, width - 1 - counts[step.prefix_rows] + slot] = step.prefix
        pos = (self.position[:, None] + mask.cumsum(-1) - 1).clamp(min=0)
        self.attn = torch.cat([self.attn, mask], dim=1)
        out = self.model(input_ids=ids, attention_mask=self.attn, position_ids=pos, use_cache=True, logits_to_keep=1,
                         **{self.cache_arg: self.cache})
        self.attn[:, -1] *= step.advance  # a token fed without keeping it is masked from now on
        self.position = self.position + counts + step.advance.long()
        return out.logits[:, -1, :].float()


def cache_arg(model: Any) -> str | None:
    """The name under which ``model.forward`` takes a KV cache (``past_key_values``, or ``cache`` in newer
    ``transformers``) when it also takes ``position_ids``; ``None`` when it does not."""
    import inspect

    params = inspect.signature(model.forward).parameters
    if "position_ids" not in params:
        return None
    return next((name for name in ("past_key_values", "cache") if name in params), None)


def make_decoder(model: Any, rows: int, capacity: int, direct: bool | None = None,
                 graphs: bool | None = None) -> DirectDecoder | HFDecoder | None:
    """The fastest decoder for ``model`` (``direct``: True forces the direct one, False the Hugging Face one);
    ``None`` when the model's forward takes no KV cache with position ids. ``graphs``: the direct decoder's CUDA
    graphs (default: on CUDA)."""
    if direct is None:
        direct = DirectDecoder.supports(model)
    if direct:
        if not DirectDecoder.supports(model):
            raise ValueError(f"the direct decoder runs {', '.join(DIRECT_MODEL_TYPES)} models, "
                             f"not {getattr(model.config, 'model_type', type(model).__name__)!r}")
        return DirectDecoder(model, rows, capacity, graphs=graphs)
    name = cache_arg(model)
    return None if name is None else HFDecoder(model, rows, name)


@cache
def _growing_layer_class() -> type:
    """A KV-cache layer that writes into a buffer doubled when full (``transformers``' ``DynamicLayer`` concatenates
    on every token: quadratic copying over a long multi-turn episode), and can keep a subset of its rows."""
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def lazy_initialization(self, key_states: Any, value_states: Any) -> None:
            super().lazy_initialization(key_states, value_states)
            self._kbuf = self._vbuf = None
            self._len = 0

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, w = self._len, key_states.shape[-2]
            if self._kbuf is None or n + w > self._kbuf.shape[-2]:
                cap = max(2 * (n + w), 64)
                kbuf = key_states.new_empty((*key_states.shape[:-2], cap, key_states.shape[-1]))
                vbuf = value_states.new_empty((*value_states.shape[:-2], cap, value_states.shape[-1]))
                if n:
                    kbuf[..., :n, :] = self._kbuf[..., :n, :]
                    vbuf[..., :n, :] = self._vbuf[..., :n, :]
                self._kbuf, self._vbuf = kbuf, vbuf
            self._kbuf[..., n : n + w, :] = key_states
            self._vbuf[..., n : n + w, :] = value_states
            self._len = n + w
            self.keys, self.values = self._kbuf[..., : self._len, :], self._vbuf[..., : self._len, :]
            return self.keys, self.values

        def select(self, keep: Any) -> None:
            if getattr(self, "_kbuf", None) is None:
                return
            self._kbuf = self._kbuf.index_select(0, keep)
            self._vbuf = self._vbuf.index_select(0, keep)
            self.keys, self.values = self._kbuf[..., : self._len, :], self._vbuf[..., : self._len, :]

    return GrowingLayer
