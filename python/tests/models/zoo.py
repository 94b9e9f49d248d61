"""PyTorch mirrors of the C++ model zoo (lib/Models/ModelZoo.cpp): the same
layers, computed the same way, with the same parameter names, so that the
zoo's programs can be checked against PyTorch on identical weights."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, bias):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, heads * self.head_dim, bias=bias)
        self.k = nn.Linear(hidden, kv_heads * self.head_dim, bias=bias)
        self.v = nn.Linear(hidden, kv_heads * self.head_dim, bias=bias)

    def project(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim)
        k = self.k(x).view(b, s, self.kv_heads, self.head_dim)
        v = self.v(x).view(b, s, self.kv_heads, self.head_dim)
        return q, k, v

    def attend(self, q, k, v):
        b, s = q.shape[:2]
        groups = self.heads // self.kv_heads
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = scores.softmax(-1) @ v
        return out.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)


class GPTAttention(Attention):
    def __init__(self, hidden, heads):
        super().__init__(hidden, heads, heads, bias=True)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.proj(self.attend(*self.project(x)))


class GPTBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["hidden"], eps=1e-5)
        self.attn = GPTAttention(c["hidden"], c["heads"])
        self.ln_2 = nn.LayerNorm(c["hidden"], eps=1e-5)
        self.mlp = nn.Module()
        self.mlp.fc = nn.Linear(c["hidden"], c["ffn"])
        self.mlp.proj = nn.Linear(c["ffn"], c["hidden"])

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = F.gelu(self.mlp.fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp.proj(m)


class ZooGPT(nn.Module):
    """cleave-models --model tiny-gpt (and any GPT config)."""

    def __init__(self, layers=2, hidden=64, heads=4, ffn=256, vocab=65, seq=32):
        super().__init__()
        c = dict(hidden=hidden, heads=heads, ffn=ffn)
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.h = nn.ModuleList(GPTBlock(c) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe.weight[None]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def rotate(x, theta=10000.0):
    """Rotary embedding in the rotate_half form, x: [B, S, H, D]."""
    s, d = x.shape[1], x.shape[3]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.arange(s, dtype=torch.float32)[:, None] * inv_freq[None]
    cos = torch.cat([angles.cos(), angles.cos()], -1)[None, :, None, :]
    sin = torch.cat([angles.sin(), angles.sin()], -1)[None, :, None, :]
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaAttention(Attention):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__(hidden, heads, kv_heads, bias=False)
        # Meta's names: wq, wk, wv, wo.
        self.wq, self.wk, self.wv = self.q, self.k, self.v
        del self.q, self.k, self.v
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim)
        return self.wo(self.attend(rotate(q), rotate(k), v))


class LlamaBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention_norm = RMSNorm(c["hidden"])
        self.attention = LlamaAttention(c["hidden"], c["heads"], c["kv_heads"])
        self.ffn_norm = RMSNorm(c["hidden"])
        self.feed_forward = nn.Module()
        self.feed_forward.w1 = nn.Linear(c["hidden"], c["ffn"], bias=False)
        self.feed_forward.w2 = nn.Linear(c["ffn"], c["hidden"], bias=False)
        self.feed_forward.w3 = nn.Linear(c["hidden"], c["ffn"], bias=False)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        m = self.ffn_norm(x)
        f = self.feed_forward
        return x + f.w2(F.silu(f.w1(m)) * f.w3(m))


class ZooLlama(nn.Module):
    """cleave-models --model tiny-llama (and any Llama config)."""

    def __init__(self, layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=65):
        super().__init__()
        c = dict(hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn)
        self.tok_embeddings = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaBlock(c) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.output = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens, targets):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
