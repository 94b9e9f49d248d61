"""Times PyTorch 1.13 eager on the zoo GPT mirror: forward, backward, AdamW.

Prints JSON like cleave-bench-train-step. Threads are pinned by the caller
(OPENBLAS_NUM_THREADS, OMP_NUM_THREADS) and again here for torch's pools.
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from cleave.torch.reference import pin_threads  # noqa: E402
from tests.models.zoo import ZooGPT, ZooLlama  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="gpt")
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("seq", 128),
                          ("batch", 8), ("vocab", 65), ("steps", 20), ("warmup", 3),
                          ("threads", 1)]:
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    pin_threads(a.threads)
    torch.manual_seed(0)
    if a.arch == "llama":
        model = ZooLlama(a.layers, a.hidden, a.heads, max(1, a.heads // 2), 8 * a.hidden // 3,
                         a.vocab)
    else:
        model = ZooGPT(a.layers, a.hidden, a.heads, 4 * a.hidden, a.vocab, a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)
    times = []
    for step in range(a.warmup + a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        targets = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    print(json.dumps({"median_ms": 1e3 * times[len(times) // 2],
                      "mean_ms": 1e3 * sum(times) / len(times)}))


if __name__ == "__main__":
    main()
