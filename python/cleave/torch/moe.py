"""Recognizes a mixture-of-experts block and exports it to the MoE ops.

A sparse MoE block cannot be traced op by op: ``torch.topk``, the expert
masks and, in the Hugging Face style, ``torch.where(expert_mask)`` with
``index_add_`` have no cleave op or data-dependent shapes. The block is
therefore recognized as a whole, the way the tracer treats ``nn.Linear``: a
leaf module whose computation is known.

Recognition has two parts:

- **Structure** (``candidate``, ``structure``): a child ``nn.Linear(H, E,
  bias=False)`` (the router) and a child ``nn.ModuleList`` of ``E`` experts
  of one class, each exactly three bias-free ``nn.Linear`` (two ``H -> F``,
  one ``F -> H``: a SwiGLU), and no other parameter.
- **Semantics** (``identify``): the module's own ``forward`` is run on a
  random input with random float64 weights (so that no two router scores
  tie) and compared with the MoE definition for every routing it could
  compute: softmax or sigmoid scores, ``top_k`` in ``1..E``, with or without
  renormalization of the selected gates, and either up projection under the
  SiLU. Exactly the block whose output is one of these (to 1e-5) is
  recognized; the routing found is the one exported. ``forward`` may return
  the output alone or ``(output, router_logits)`` (Hugging Face Mixtral).

A module with a router beside a list of experts that fails either part (a
GELU expert, a router with a bias, shared experts, jitter...) is traced
through as usual; if that fails, the export error names the module and why
it was not recognized.

Mixtral's load-balancing loss (Hugging Face's ``load_balancing_loss_func``
over the router logits the blocks return) is traced: ``torch.topk`` gives a
``Pending`` value followed through ``one_hot``, the mean over tokens and the
product with the mean router probability to its ``sum``, which becomes
``cleave.moe_aux_loss`` (``_RouterChoice``).

Lowering (docs/moe.md): the tokens are grouped as ``[G, S, H]`` (one group
per sequence of a ``[B, S, H]`` input, one group for ``[N, H]``), the router
is dropless (``C = S``), and the experts are batched matmuls over the
stacked weights: each expert's ``w.weight`` becomes one parameter
``experts.*.w.weight`` of shape ``[E, out, in]`` (``params.py`` stacks and
splits them, so parameter files map to the state_dict both ways).
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.stateless import functional_call

from .ir import Value
from .lowering import BLOCKS, Pending, Unsupported, lowers
from .tracer import RECOGNIZERS

#: Agreement required between the module and the MoE definition (float64
#: weights; Hugging Face computes the softmax in float32 whatever the input).
#: Two different routings differ by far more.
_RTOL = 1e-5
#: Tokens of the random input ``identify`` runs the block on.
_PROBE_TOKENS = 64
#: The most tokens per routing group of the export (``_groups``).
_GROUP_TOKENS = 64


@dataclass(frozen=True)
class Candidate:
    """A module shaped like a MoE block: its router and experts."""

    gate_name: str
    gate: nn.Linear
    experts_name: str
    experts: nn.ModuleList

    def describe(self) -> str:
        return (f"router '{self.gate_name}' Linear({self.gate.in_features}, "
                f"{self.gate.out_features}) and {len(self.experts)} experts "
                f"'{self.experts_name}'")


@dataclass(frozen=True)
class MoEBlock:
    """A recognized block: what the lowering needs."""

    candidate: Candidate
    act: str  # the expert's Linear under the SiLU (w1, gate_proj)
    up: str  # the other H -> F Linear (w3, up_proj)
    down: str  # the F -> H Linear (w2, down_proj)
    top_k: int
    normalize: bool
    sigmoid: bool
    returns_logits: bool  # forward returns (output, router_logits)


def _reads_hidden(expert: nn.Module, hidden: int) -> bool:
    """An expert-like module: a child Linear reading the hidden size."""
    return any(isinstance(c, nn.Linear) and c.in_features == hidden
               for c in expert.children())


def candidate(module: nn.Module) -> Optional[Candidate]:
    """A child Linear(H, E) beside a child ModuleList of E modules that each
    have a Linear reading H: what looks like a MoE block."""
    children = list(module.named_children())
    lists = [(n, c) for n, c in children if isinstance(c, nn.ModuleList) and len(c) >= 2]
    for gate_name, gate in children:
        if not isinstance(gate, nn.Linear):
            continue
        for experts_name, experts in lists:
            if len(experts) == gate.out_features and all(
                    _reads_hidden(e, gate.in_features) for e in experts):
                return Candidate(gate_name, gate, experts_name, experts)
    return None


def structure(module: nn.Module, cand: Candidate) -> Tuple[Optional[List[str]], str]:
    """The names of the experts' (first up, second up, down) Linears when
    ``module`` is a router plus SwiGLU experts and nothing else; otherwise
    (None, why not)."""
    gate, hidden = cand.gate, cand.gate.in_features
    if gate.bias is not None:
        return None, f"the router '{cand.gate_name}' has a bias"
    kinds = {type(e) for e in cand.experts}
    if len(kinds) != 1:
        return None, "the experts are not all of one class"
    first = cand.experts[0]
    linears = [(n, c) for n, c in first.named_children() if isinstance(c, nn.Linear)]
    if len(linears) != 3 or len(list(first.parameters())) != 3:
        return None, (f"an expert ({type(first).__name__}) is not three bias-free Linear "
                      f"layers (a SwiGLU: silu(w1 x) * w3 x, then w2)")
    if any(c.bias is not None for _, c in linears):
        return None, "an expert's Linear layers have biases"
    ups = [n for n, c in linears if c.in_features == hidden]
    downs = [n for n, c in linears if c.out_features == hidden and c.in_features != hidden]
    if len(ups) != 2 or len(downs) != 1:
        return None, (f"an expert's Linear layers are not two {hidden} -> F and one "
                      f"F -> {hidden}")
    width = getattr(first, ups[0]).out_features
    if getattr(first, ups[1]).out_features != width or \
            getattr(first, downs[0]).in_features != width:
        return None, "an expert's Linear layers disagree on the expert width"
    shapes = [tuple(p.shape) for p in first.parameters()]
    for index, expert in enumerate(cand.experts):
        if [tuple(p.shape) for p in expert.parameters()] != shapes:
            return None, f"expert {index} has other shapes than expert 0"
    own = {id(p) for p in gate.parameters()} | {id(p) for p in cand.experts.parameters()}
    extra = [n for n, p in module.named_parameters() if id(p) not in own]
    if extra:
        return None, (f"it has parameters beside the router and the experts "
                      f"({', '.join(extra[:3])}): shared experts or other layers")
    return ups + downs, ""


def _reference_outputs(x, gate_w, experts_w, names):
    """Every expert's output on every token, for both choices of the SiLU
    input: {(act, up): [E, ..., H]}."""
    a, b, down = names
    outs = {}
    for act, up in ((a, b), (b, a)):
        outs[(act, up)] = torch.stack([
            F.linear(F.silu(F.linear(x, w[act])) * F.linear(x, w[up]), w[down])
            for w in experts_w])
    return outs


def _routings(logits, experts_count):
    """(sigmoid, top_k, normalize, gates [..., E]) for every routing."""
    for sigmoid in (False, True):
        scores = torch.sigmoid(logits) if sigmoid else torch.softmax(logits, -1)
        for k in range(1, experts_count + 1):
            top, chosen = torch.topk(scores, k, dim=-1)
            for normalize in (False, True):
                if normalize and k == experts_count and not sigmoid:
                    continue  # the softmax already sums to 1
                weights = top / top.sum(-1, keepdim=True) if normalize else top
                yield sigmoid, k, normalize, torch.zeros_like(scores).scatter(
                    -1, chosen, weights)


def identify(module: nn.Module, cand: Candidate, names: List[str], example_shape,
             seed: int = 0) -> Tuple[Optional[MoEBlock], str]:
    """Runs ``module.forward`` on random data and finds the routing it
    computes; (block, "") or (None, why not)."""
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, p in module.named_parameters():
        # Unit-variance router logits: the scores spread over the experts,
        # so that each top_k and the renormalization change the output.
        fan_in = p.shape[-1] if p.dim() > 1 else 1
        state[name] = torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(
            fan_in)
    for name, buf in module.named_buffers():
        state[name] = buf.double() if buf.is_floating_point() else buf
    # At most _PROBE_TOKENS tokens, keeping the input's rank: enough to tell
    # the routings apart, cheap for a long sequence.
    lead = [1] * (len(example_shape) - 1)
    if lead:
        lead[-1] = min(example_shape[-2], _PROBE_TOKENS)
    shape = tuple(lead) + (example_shape[-1],)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    try:
        with torch.no_grad():
            output = functional_call(module, state, (x,))
    except Exception as err:  # its forward needs more than one tensor argument
        return None, f"its forward failed on a random [{', '.join(map(str, shape))}] " \
                     f"input: {type(err).__name__}: {err}"
    returns_logits = False
    if isinstance(output, (tuple, list)):
        if len(output) != 2:
            return None, f"its forward returns {len(output)} values"
        output, logits_out = output
        returns_logits = True
    if not isinstance(output, torch.Tensor) or tuple(output.shape) != shape:
        return None, "its forward does not return a tensor of its input's shape"
    gate_w = state[f"{cand.gate_name}.weight"]
    logits = F.linear(x, gate_w)
    if returns_logits and not (isinstance(logits_out, torch.Tensor) and
                               logits_out.numel() == logits.numel() and torch.allclose(
                                   logits_out.double().reshape(logits.shape), logits)):
        return None, "the second value its forward returns is not the router logits"
    prefix = cand.experts_name
    experts_w = [{n: state[f"{prefix}.{e}.{n}.weight"] for n in names}
                 for e in range(len(cand.experts))]
    outs = _reference_outputs(x, gate_w, experts_w, names)
    scale = max(output.abs().max().item(), 1e-30)
    for sigmoid, k, normalize, gates in _routings(logits, len(cand.experts)):
        for (act, up), expert_out in outs.items():
            y = torch.einsum("...e,e...h->...h", gates, expert_out)
            if (y - output.double()).abs().max().item() <= _RTOL * scale:
                return MoEBlock(cand, act, up, names[2], k, normalize, sigmoid,
                                returns_logits), ""
    return None, ("its output is not a top-k mixture of its SwiGLU experts under a softmax "
                  "or sigmoid router (with or without renormalized gates)")


def _signature(module: nn.Module, cand: Candidate, example_shape):
    """What ``identify``'s answer depends on: the classes, the parameter
    shapes, the plain attributes (``top_k``, flags) and the input's rank.
    Blocks with equal signatures (the layers of a model) are probed once."""
    def plain(m):
        return tuple(sorted((k, v) for k, v in vars(m).items()
                            if isinstance(v, (bool, int, float, str))))
    return (type(module), type(cand.experts[0]), plain(module), plain(cand.experts[0]),
            tuple((n, tuple(p.shape)) for n, p in module.named_parameters()),
            len(example_shape))


def recognize(module: nn.Module, example_shape, cache) -> Tuple[Optional[MoEBlock], str]:
    """(block, "") for a MoE block; (None, "") for a module that does not
    look like one; (None, why not) for one that looks like one but is not
    recognized. ``cache`` (one per trace) holds the routings found."""
    cand = candidate(module)
    if cand is None or len(example_shape) < 2 or example_shape[-1] != cand.gate.in_features:
        return None, ""
    names, reason = structure(module, cand)
    block = None
    if names is not None:
        key = _signature(module, cand, example_shape)
        if key not in cache:
            cache[key] = identify(module, cand, names, example_shape)
        found, reason = cache[key]
        if found is not None:
            block = dataclasses.replace(found, candidate=cand)
    if block is None:
        reason = f"{type(module).__name__} has {cand.describe()}, but {reason}"
    return block, reason


# Lowering ---------------------------------------------------------------------

def _groups(shape) -> Tuple[int, int]:
    """(G, S) for a [B, T, H] input ([T, H]: B = 1): each sequence split into
    groups of S tokens, S the largest divisor of T up to _GROUP_TOKENS.
    Dropless routing is per token, so any grouping computes the same; short
    groups keep the routing tensors ([G, S, E, S]) and the dispatch linear in
    T, and the batch dimension stays outermost (data parallelism splits G)."""
    lead = shape[:-1]
    batch, length = math.prod(lead[:-1]), lead[-1]
    size = max(d for d in range(1, min(length, _GROUP_TOKENS) + 1) if length % d == 0)
    return batch * (length // size), size


def lower_block(cx, *args, block: MoEBlock, **kwargs):
    """The block as moe_router (dropless), moe_dispatch, batched SwiGLU
    experts over stacked weights and moe_combine. Its one tensor argument
    (the tracer checked) may be passed by keyword."""
    (x,) = list(args) + list(kwargs.values())
    out = cx.out[0] if block.returns_logits else cx.out
    out_t = cx.out_type(out)
    if not out_t.is_float:
        raise Unsupported("a mixture of experts on integer tensors")
    x = cx.value(x, out_t.dtype)
    b, cand = cx.b, block.candidate
    hidden, experts = x.shape[-1], len(cand.experts)
    groups, seq = _groups(x.shape)
    tokens = b.reshape(x, (groups, seq, hidden))
    gate = cx.param(cand.gate.weight)
    logits = b.matmul(tokens, gate, transpose_rhs=True)
    routing_t = logits.type.with_shape((groups, seq, experts, seq))
    attrs = {"top_k": block.top_k, "normalize": block.normalize, "sigmoid": block.sigmoid}
    combine, dispatch = b.create("moe_router", [logits], attrs, [routing_t, routing_t])
    buffer_t = x.type.with_shape((experts, groups, seq, hidden))
    buffer = b.create1("moe_dispatch", [tokens, dispatch], {}, buffer_t)
    flat = b.reshape(buffer, (experts, groups * seq, hidden))

    def stacked(name):
        return cx.lowering.stacked_param_value(
            [getattr(e, name).weight for e in cand.experts])
    act = b.matmul(flat, stacked(block.act), transpose_rhs=True)
    up = b.matmul(flat, stacked(block.up), transpose_rhs=True)
    product = b.binary("mul", b.unary("silu", act), up)
    expert_out = b.reshape(b.matmul(product, stacked(block.down), transpose_rhs=True),
                           buffer_t.shape)
    y = b.create1("moe_combine", [combine, expert_out], {},
                  x.type.with_shape((groups, seq, hidden)))
    y = b.reshape(y, out_t.shape)
    if not block.returns_logits:
        return y
    return (y, b.reshape(logits, cx.out_type(cx.out[1]).shape))



# The load-balancing loss ----------------------------------------------------------

def _op_name(node) -> str:
    if node.op == "call_method":
        return node.target
    return getattr(node.target, "__name__", "")


def _strip_reshapes(value: Value) -> Value:
    while value.op is not None and value.op.name == "reshape":
        value = value.op.operands[0]
    return value


@dataclass(frozen=True)
class _RouterChoice(Pending):
    """``torch.topk(scores, k)`` with ``scores = softmax(logits, -1)`` of
    ``[N, E]`` router logits, followed through Hugging Face's
    ``load_balancing_loss_func``: ``part`` is where the computation is."""

    scores: Value
    k: int
    part: str  # values, indices, mask, shares (mean over tokens), terms (x probs)

    def expected(self) -> str:
        return ("torch.topk is exported only as the expert choice of a load-balancing "
                "loss (Hugging Face's load_balancing_loss_func): sum(one_hot(topk(p, k)"
                ".indices, E).float().mean(0) * p.mean(0)) with p = softmax(logits, -1) "
                "of [tokens, E] router logits; this is another use of its "
                f"{self.part}")

    def lower(self, cx, args, kwargs):
        name = _op_name(cx.node)
        experts = self.scores.shape[-1]
        if self.part == "indices" and name == "one_hot":
            classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
            if classes == experts:
                return dataclasses.replace(self, part="mask")
        elif self.part == "mask" and name in ("float", "to", "type", "double") \
                and args[0] is self and cx.out.is_floating_point():
            return self
        elif self.part == "mask" and name == "mean" and args[0] is self:
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            if dim in (0, (0,), [0]) and not kwargs.get("keepdim", False):
                return dataclasses.replace(self, part="shares")
        elif self.part == "shares" and name == "mul" and len(args) == 2:
            other = args[1] if args[0] is self else args[0]
            mean = _strip_reshapes(other) if isinstance(other, Value) else None
            if (mean is not None and mean.op is not None and mean.op.name == "reduce_mean"
                    and mean.op.operands[0] is self.scores and mean.op.attrs["dims"] == [0]):
                return dataclasses.replace(self, part="terms")
        elif self.part == "terms" and name == "sum" and args[0] is self and len(args) == 1 \
                and not kwargs:
            return self._aux_loss(cx)
        raise Unsupported(self.expected())

    def _aux_loss(self, cx) -> Value:
        """sum_{j,e} share[j,e] P[e] = k * moe_aux_loss / E (the op is
        E sum_e f[e] P[e] with f the share of the N * k selections)."""
        b = cx.b
        logits = self.scores.op.operands[0]
        tokens, experts = logits.shape
        grouped = b.reshape(logits, (1, tokens, experts))
        out_t = cx.out_type()
        aux = b.create1("moe_aux_loss", [grouped], {"top_k": self.k}, out_t)
        return b.binary("mul", aux, b.splat(self.k / experts, out_t))


@lowers(torch.topk, "topk")
def _topk(cx, input, k, dim=-1, largest=True, sorted=True):
    scores = input if isinstance(input, Value) else None
    if scores is None or scores.op is None or scores.op.name != "softmax" \
            or scores.type.rank != 2 or scores.op.attrs["dim"] != 1:
        raise Unsupported("torch.topk is exported only over softmax(router logits, -1) of "
                          "[tokens, E] logits, in a load-balancing loss (docs/"
                          "pytorch-frontend.md, Mixture-of-experts blocks)")
    if dim not in (-1, 1) or not largest:
        raise Unsupported(f"torch.topk with dim={dim}, largest={largest}")
    return (_RouterChoice(scores, int(k), "values"), _RouterChoice(scores, int(k), "indices"))


RECOGNIZERS.append(recognize)
BLOCKS[MoEBlock] = lower_block
