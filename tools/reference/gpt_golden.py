#!/usr/bin/env python3
"""Writes the PyTorch golden file that tests/executor/test_exec_golden.c
checks tf-exec's GPT against.

The model is built here independently of tf-exec, from PyTorch's own
modules (nn.Embedding, nn.LayerNorm, nn.Linear, GELU with the tanh
approximation) and a plain causal attention, in float64 so that the file
holds the exact answer for its float32 weights.  The C test loads the same
weights into a one-stage tf-exec model, runs one microbatch forward and
backward in float32, and compares the loss, the logits and every
parameter's gradient.

Usage (needs PyTorch; Debian 12: apt-get install python3-torch):
    python3 tools/reference/gpt_golden.py -o tests/executor/golden/gpt_tiny.bin

File layout, little-endian:
    char[8]   "TFXGOLD1"
    int32[8]  layers hidden heads ffn context microbatch_size vocab n_tensors
    n_tensors x (int32 name_len, name bytes, int32 rows, int32 cols)
    int32[N]  tokens       (N = context * microbatch_size)
    int32[N]  targets
    float64   loss         (mean cross-entropy over the N positions)
    float32[N*vocab] logits
    float32   every tensor's weights, in the order above
    float32   every tensor's gradient of the loss, same order
Linear weights are stored as PyTorch stores them: (out_features, in_features).
"""
import argparse
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256


class Block(nn.Module):
    """Pre-norm block: x + proj(attn(ln1(x))), then x + fc2(gelu(fc1(ln2(x))))."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        split = lambda z: z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, t, c)

    def forward(self, x):
        x = x + self.proj(self.attention(self.ln1(x)))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, ffn, context):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, hidden)
        self.wpe = nn.Embedding(context, hidden)
        self.blocks = nn.ModuleList([Block(hidden, heads, ffn) for _ in range(layers)])
        self.lnf = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))

    def tensors(self):
        """(tf-exec name, parameter) in tf-exec's model order."""
        out = [("embed.token", self.wte.weight), ("embed.position", self.wpe.weight)]
        for i, b in enumerate(self.blocks):
            for name, p in [("ln1.weight", b.ln1.weight), ("ln1.bias", b.ln1.bias),
                            ("attn.qkv.weight", b.qkv.weight), ("attn.qkv.bias", b.qkv.bias),
                            ("attn.proj.weight", b.proj.weight), ("attn.proj.bias", b.proj.bias),
                            ("ln2.weight", b.ln2.weight), ("ln2.bias", b.ln2.bias),
                            ("mlp.fc1.weight", b.fc1.weight), ("mlp.fc1.bias", b.fc1.bias),
                            ("mlp.fc2.weight", b.fc2.weight), ("mlp.fc2.bias", b.fc2.bias)]:
                out.append(("block%d.%s" % (i, name), p))
        out += [("final.ln.weight", self.lnf.weight), ("final.ln.bias", self.lnf.bias),
                ("head.weight", self.head.weight)]
        return out


def randomise(model, gen):
    """Weights far from a trained model's but with every path alive: attention
    is not uniform, LayerNorm gains are not 1, biases are not 0.  Rounded to
    float32, the precision tf-exec holds them in."""
    with torch.no_grad():
        for name, p in model.tensors():
            if name.endswith("ln1.weight") or name.endswith("ln2.weight") or name == "final.ln.weight":
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
            elif name.startswith("embed"):
                v = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            else:
                v = torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(p.shape[1])
            p.copy_(v.float().double())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=48)
    ap.add_argument("--context", type=int, default=16)
    ap.add_argument("--microbatch-size", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()

    gen = torch.Generator().manual_seed(a.seed)
    model = GPT(a.layers, a.hidden, a.heads, a.ffn, a.context).double()
    randomise(model, gen)
    n = a.context * a.microbatch_size
    tokens = torch.randint(0, VOCAB, (a.microbatch_size, a.context), generator=gen)
    targets = torch.randint(0, VOCAB, (a.microbatch_size, a.context), generator=gen)

    logits = model(tokens)
    loss = F.cross_entropy(logits.view(n, VOCAB), targets.view(n))
    loss.backward()

    named = model.tensors()
    with open(a.output, "wb") as f:
        f.write(b"TFXGOLD1")
        f.write(struct.pack("<8i", a.layers, a.hidden, a.heads, a.ffn, a.context,
                            a.microbatch_size, VOCAB, len(named)))
        for name, p in named:
            rows, cols = (p.shape[0], p.shape[1]) if p.dim() == 2 else (1, p.shape[0])
            f.write(struct.pack("<i", len(name)) + name.encode() + struct.pack("<2i", rows, cols))
        f.write(tokens.reshape(-1).to(torch.int32).numpy().astype("<i4").tobytes())
        f.write(targets.reshape(-1).to(torch.int32).numpy().astype("<i4").tobytes())
        f.write(struct.pack("<d", loss.item()))
        f.write(logits.detach().reshape(-1).float().numpy().astype("<f4").tobytes())
        for _, p in named:
            f.write(p.detach().reshape(-1).float().numpy().astype("<f4").tobytes())
        for _, p in named:
            f.write(p.grad.reshape(-1).float().numpy().astype("<f4").tobytes())
    print("%s: %d tensors, loss %.10f, torch %s" % (a.output, len(named), loss.item(),
                                                   torch.__version__))


if __name__ == "__main__":
    main()
