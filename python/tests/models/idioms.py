"""Small models written the way popular model libraries write them.

- ``HFGPT2``: Hugging Face GPT-2's layers: ``Conv1D`` (``torch.addmm`` over
  a ``[in, out]`` weight), scores divided by ``torch.full([], sqrt(d))``, the
  causal mask applied with ``torch.where(bias, scores, finfo(dtype).min)``,
  an additive attention mask, ``softmax(...).type(value.dtype)``, and
  ``nn.CrossEntropyLoss()`` on shifted labels (``ignore_index`` -100).
- ``BaddbmmAttention``: scores as ``torch.baddbmm(empty, q, k^T, beta=0,
  alpha=scale)`` over ``[B*H, S, D]`` (HF's reordered, upcast attention),
  ``masked_fill`` with ``finfo.min`` and ``softmax(..., dtype=float32)``;
  with ``alibi=True`` the ``baddbmm`` adds ALiBi position biases (Bloom),
  which exports but is no ``cleave.attention`` (it has no bias operand).
- ``PaddedEmbedding``: ``nn.Embedding(padding_idx=...)``.
- ``KwargsOnly``: ``forward(*args, **kwargs)`` reading its inputs by keyword.
- ``HandWritten``: attention written out by hand, in the variant named by
  ``style``.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, EMBD, HEADS, SEQ = 64, 32, 2, 16


class Conv1D(nn.Module):
    """Hugging Face's Conv1D: a linear layer with a transposed weight."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.randn(nf) * 0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones((SEQ, SEQ), dtype=torch.bool))
                             .view(1, 1, SEQ, SEQ), persistent=False)
        self.c_attn = Conv1D(3 * EMBD, EMBD)
        self.c_proj = Conv1D(EMBD, EMBD)
        self.head_dim = EMBD // HEADS

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (HEADS, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def _attn(self, query, key, value, attention_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full(
            [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype,
                                device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        return torch.matmul(attn_weights, value)

    def forward(self, hidden_states, attention_mask):
        query, key, value = self.c_attn(hidden_states).split(EMBD, dim=2)
        query, key, value = (self._split_heads(t) for t in (query, key, value))
        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = attn_output.permute(0, 2, 1, 3).contiguous()
        attn_output = attn_output.view(attn_output.size()[:-2] + (EMBD,))
        return self.c_proj(attn_output)


class GPT2Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(EMBD, eps=1e-5)
        self.attn = GPT2Attention()
        self.ln_2 = nn.LayerNorm(EMBD, eps=1e-5)
        self.c_fc = Conv1D(4 * EMBD, EMBD)
        self.c_proj = Conv1D(EMBD, 4 * EMBD)

    def forward(self, hidden_states, attention_mask):
        hidden_states = hidden_states + self.attn(self.ln_1(hidden_states), attention_mask)
        mlp = self.c_proj(F.gelu(self.c_fc(self.ln_2(hidden_states)), approximate="tanh"))
        return hidden_states + mlp


class HFGPT2(nn.Module):
    def __init__(self, n_layer=2):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, EMBD)
        self.wpe = nn.Embedding(SEQ, EMBD)
        self.h = nn.ModuleList([GPT2Block() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(EMBD)
        self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, labels):
        batch, length = input_ids.size()
        position_ids = torch.arange(0, length, dtype=torch.long).unsqueeze(0)
        # HF's extended mask of an all-ones attention_mask: (1 - 1) * finfo.min.
        attention_mask = torch.ones(batch, length)[:, None, None, :]
        attention_mask = (1.0 - attention_mask) * torch.finfo(torch.float32).min
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)
        for block in self.h:
            hidden_states = block(hidden_states, attention_mask)
        lm_logits = self.lm_head(self.ln_f(hidden_states))
        shift_logits = lm_logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        loss_fct = nn.CrossEntropyLoss()
        loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        return {"loss": loss, "logits": lm_logits}


def make_hf_gpt2(n_layer=2):
    """HFGPT2 initialized as Hugging Face does (normal(0, 0.02) embeddings)."""
    torch.manual_seed(0)
    model = HFGPT2(n_layer)
    for embedding in (model.wte, model.wpe):
        nn.init.normal_(embedding.weight, std=0.02)
    return model


class BaddbmmAttention(nn.Module):
    """One attention layer over ``[B*H, S, D]`` with baddbmm scores."""

    def __init__(self, alibi=False):
        super().__init__()
        torch.manual_seed(1)
        self.emb = nn.Embedding(VOCAB, EMBD)
        self.qkv = nn.Linear(EMBD, 3 * EMBD)
        self.out = nn.Linear(EMBD, VOCAB)
        self.alibi = alibi
        self.register_buffer("causal", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)),
                             persistent=False)

    def _alibi(self, batch):
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / HEADS) for h in range(HEADS)])
        bias = slopes[:, None] * torch.arange(SEQ, dtype=torch.float32)[None, :]
        return bias[None, :, None, :].expand(batch, HEADS, 1, SEQ).reshape(
            batch * HEADS, 1, SEQ)

    def forward(self, idx, targets):
        batch, length = idx.shape
        d = EMBD // HEADS
        q, k, v = self.qkv(self.emb(idx)).split(EMBD, dim=-1)
        q, k, v = (t.view(batch, length, HEADS, d).transpose(1, 2).reshape(
            batch * HEADS, length, d) for t in (q, k, v))
        if self.alibi:
            base, beta = self._alibi(batch), 1.0
        else:
            base, beta = torch.empty(batch * HEADS, length, length), 0.0
        scores = torch.baddbmm(base, q, k.transpose(1, 2), beta=beta,
                               alpha=1.0 / math.sqrt(d))
        scores = scores.masked_fill(~self.causal[:length, :length],
                                    torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)
        y = torch.bmm(probs, v).view(batch, HEADS, length, d).transpose(1, 2)
        logits = self.out(y.reshape(batch, length, EMBD))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


class PaddedEmbedding(nn.Module):
    """Token embeddings whose padding row (id 0) gets no gradient."""

    def __init__(self, padding_idx=0):
        super().__init__()
        torch.manual_seed(2)
        self.emb = nn.Embedding(VOCAB, EMBD, padding_idx=padding_idx)
        self.proj = nn.Linear(EMBD, VOCAB)

    def forward(self, idx, targets):
        logits = self.proj(torch.tanh(self.emb(idx)))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


class KwargsOnly(nn.Module):
    """``forward(*args, **kwargs)``: the inputs only by keyword."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.emb = nn.Embedding(VOCAB, EMBD)
        self.proj = nn.Linear(EMBD, VOCAB)

    def forward(self, *args, **kwargs):
        logits = self.proj(self.emb(kwargs["input_ids"]))
        labels = kwargs.get("labels")
        return F.cross_entropy(logits.view(-1, VOCAB), labels.view(-1))


class HandWritten(nn.Module):
    """Attention written out by hand: ``style`` picks the mask and softmax."""

    STYLES = ("additive_inf", "additive_finfo", "masked_fill_finfo", "upcast_float",
              "upcast_double", "softmax_dtype", "zero_padding_mask")

    def __init__(self, style):
        super().__init__()
        torch.manual_seed(4)
        self.style = style
        self.emb = nn.Embedding(VOCAB, EMBD)
        self.qkv = nn.Linear(EMBD, 3 * EMBD)
        self.out = nn.Linear(EMBD, VOCAB)
        causal = torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)
        additive = torch.zeros(SEQ, SEQ).masked_fill(~causal, float("-inf"))
        self.register_buffer("additive", additive, persistent=False)

    def _scores(self, q, k):
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.size(-1)))
        n = q.size(-2)
        style = self.style
        if style == "additive_inf":
            return scores + self.additive[:n, :n]
        if style == "additive_finfo":
            mask = torch.zeros(n, n).masked_fill(~self.causal[:n, :n],
                                                 torch.finfo(scores.dtype).min)
            return scores + mask[None, None]
        if style == "zero_padding_mask":
            padding = torch.ones(q.size(0), n)  # nothing padded
            padding = (1.0 - padding[:, None, None, :]) * torch.finfo(scores.dtype).min
            return scores.masked_fill(~self.causal[:n, :n], float("-inf")) + padding
        return scores.masked_fill(~self.causal[:n, :n], torch.finfo(scores.dtype).min)

    def _softmax(self, scores, dtype):
        if self.style == "upcast_float":
            return F.softmax(scores.float(), dim=-1).to(dtype)
        if self.style == "upcast_double":
            return F.softmax(scores.double(), dim=-1).to(dtype)
        if self.style == "softmax_dtype":
            return F.softmax(scores, dim=-1, dtype=torch.float32).to(dtype)
        return F.softmax(scores, dim=-1)

    def forward(self, idx, targets):
        batch, length = idx.shape
        d = EMBD // HEADS
        q, k, v = self.qkv(self.emb(idx)).split(EMBD, dim=-1)
        q, k, v = (t.view(batch, length, HEADS, d).transpose(1, 2) for t in (q, k, v))
        y = self._softmax(self._scores(q, k), q.dtype) @ v
        logits = self.out(y.transpose(1, 2).reshape(batch, length, EMBD))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
