"""A Mixtral-style model written the usual PyTorch way: the Llama decoder of
llama.py with its SwiGLU feed-forward replaced by a sparse mixture of
experts (router nn.Linear(H, E, bias=False), softmax, torch.topk, optionally
renormalized gates, an nn.ModuleList of SwiGLU experts).

Three ways to write the block:

- ``SparseMoeBlock``: a loop over the experts combined with a mask (every
  expert sees every token; the gate is zero where it was not chosen);
- ``HFSparseMoeBlock``: Hugging Face's MixtralSparseMoeBlock (one_hot expert
  mask, ``torch.where`` for each expert's tokens, ``index_select`` and
  ``index_add_``; returns ``(output, router_logits)``), which fx cannot trace
  (the token lists depend on the data);
- ``GeluMoeBlock``: the Hugging Face style with GELU experts, which Cleave
  does not recognize: its export fails naming the block.

With ``aux_loss_coef`` (Hugging Face's block), the loss adds Mixtral's
load-balancing loss of all layers' router logits.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.models.llama import FeedForward, Llama, LlamaConfig, TransformerBlock


@dataclass
class MixtralConfig(LlamaConfig):
    experts: int = 4
    top_k: int = 2
    normalize: bool = True
    expert_hidden_dim: int = 48
    block: str = "mask"  # mask, hf or gelu
    aux_loss_coef: float = 0.0  # Mixtral's router_aux_loss_coef (hf and gelu blocks)


class SparseMoeBlock(nn.Module):
    def __init__(self, dim, hidden_dim, experts, top_k, normalize):
        super().__init__()
        self.top_k = top_k
        self.normalize = normalize
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList([FeedForward(dim, hidden_dim) for _ in range(experts)])

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1, dtype=torch.float)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            gate = (weights * (chosen == e)).sum(dim=-1, keepdim=True)
            out = out + gate * expert(x)
        return out


class HFSparseMoeBlock(nn.Module):
    """After transformers' MixtralSparseMoeBlock (no jitter)."""

    def __init__(self, dim, hidden_dim, experts, top_k, normalize, expert=FeedForward):
        super().__init__()
        self.num_experts = experts
        self.top_k = top_k
        self.normalize = normalize
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList([expert(dim, hidden_dim) for _ in range(experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.normalize:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim),
                                          dtype=hidden_states.dtype)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts)
        expert_mask = expert_mask.permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx,
                                                                                  None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states)
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length,
                                                          hidden_dim)
        return final_hidden_states, router_logits


class GeluExpert(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim, bias=False)
        self.fc2 = nn.Linear(hidden_dim, dim, bias=False)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class GeluMoeBlock(HFSparseMoeBlock):
    def __init__(self, dim, hidden_dim, experts, top_k, normalize):
        super().__init__(dim, hidden_dim, experts, top_k, normalize, expert=GeluExpert)


_BLOCKS = {"mask": SparseMoeBlock, "hf": HFSparseMoeBlock, "gelu": GeluMoeBlock}


class MixtralBlock(TransformerBlock):
    def __init__(self, config):
        super().__init__(config)
        self.feed_forward = _BLOCKS[config.block](config.dim, config.expert_hidden_dim,
                                                  config.experts, config.top_k,
                                                  config.normalize)

    def forward(self, x, cos, sin, mask):
        h = x + self.attention(self.attention_norm(x), cos, sin, mask)
        router_logits = None
        if isinstance(self.feed_forward, HFSparseMoeBlock):
            out, router_logits = self.feed_forward(self.ffn_norm(h))
        else:
            out = self.feed_forward(self.ffn_norm(h))
        return h + out, router_logits


def load_balancing_loss_func(gate_logits, num_experts, top_k=2):
    """transformers' Mixtral load_balancing_loss_func (without attention_mask)."""
    compute_device = gate_logits[0].device
    concatenated_gate_logits = torch.cat([layer_gate.to(compute_device)
                                          for layer_gate in gate_logits], dim=0)
    routing_weights = torch.nn.functional.softmax(concatenated_gate_logits, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_experts)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
    return overall_loss * num_experts


class Mixtral(Llama):
    def __init__(self, config):
        super().__init__(config)
        self.layers = nn.ModuleList([MixtralBlock(config) for _ in range(config.n_layers)])

    def forward(self, tokens, targets):
        B, T = tokens.shape
        h = self.tok_embeddings(tokens)
        cos, sin = self.rotary(T)
        mask = torch.triu(torch.full((T, T), float("-inf"), device=tokens.device), diagonal=1)
        router_logits = []
        for layer in self.layers:
            h, layer_logits = layer(h, cos, sin, mask)
            router_logits.append(layer_logits)
        logits = self.output(self.norm(h)).float()
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        if self.config.aux_loss_coef:
            aux = load_balancing_loss_func(tuple(router_logits), self.config.experts,
                                           self.config.top_k)
            loss = loss + self.config.aux_loss_coef * aux
        return loss


def make_mixtral(**overrides):
    """Factory for the command line: Mixtral(MixtralConfig(**overrides))."""
    return Mixtral(MixtralConfig(**overrides))
