"""PyTorch peer of Trident's training-step benchmark.

Runs the identical GPT-2 (pre-LN, learned positions, tied embeddings, tanh GeLU, causal
attention), batch and optimizer (AdamW, fused=False) in eager fp32 on the CPU, and prints
tokens/s per shape, one JSON line each:

    python3 torch_train_step.py --threads 2 --shape tiny --shape gpt2-124m
"""

import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {
    # name: (layers, channels, heads, seq_len, vocab, batch)
    "tiny": (4, 256, 4, 256, 256, 8),
    "gpt2-124m": (12, 768, 12, 256, 50304, 4),
}


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.fc_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, c, nh, t, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(t, c)
        self.blocks = nn.ModuleList(Block(c, nh) for _ in range(layers))
        self.lnf = nn.LayerNorm(c)
        # GPT-2 initialisation, as Trident's: normal(0.02), residual projections scaled.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "fc_proj.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def run(name, steps, warmup):
    layers, c, nh, t, vocab, b = SHAPES[name]
    torch.manual_seed(0)
    model = Gpt(layers, c, nh, t, vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, foreach=True)
    idx = torch.randint(0, vocab, (b, t))
    tgt = torch.randint(0, vocab, (b, t))
    for i in range(warmup + steps):
        if i == warmup:
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
    dt = (time.perf_counter() - start) / steps
    params = sum(p.numel() for p in model.parameters())
    # 6 N per token for the matmuls plus the attention scores and mixing (fwd + bwd).
    flops = 6 * params * b * t + 12 * layers * c * t * b * t
    print(json.dumps({
        "peer": "pytorch-eager-fp32", "shape": name, "threads": torch.get_num_threads(),
        "step_s": dt, "tokens_per_s": b * t / dt, "gflops": flops / dt / 1e9,
        "loss": loss.item(),
    }), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.shape or ["tiny"]:
        run(name, a.steps, a.warmup)


if __name__ == "__main__":
    main()
