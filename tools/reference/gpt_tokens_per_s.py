#!/usr/bin/env python3
"""tf-exec's training speed against the same GPT in PyTorch eager, on the
CPU, one run each, same shape and batch.

    python gpt_tokens_per_s.py [--tf-exec build/executor/tf-exec] [--steps 20]
        [--layers 4 --hidden 192 --heads 6 --ffn 768 --context 64
         --microbatch-size 8 --microbatches 4] [--threads 1]

tf-exec: one rank (`--ranks 1 --no-freeze`), its tokens/s per step from
`--log`.  PyTorch: the model of gpt_golden.py (PyTorch's own modules, in
float32), one step = every microbatch's forward and backward with the
gradients summed, then AdamW, as tf-exec's step; torch.set_num_threads(
--threads), one like tf-exec's CPU rank.  Each reports the median over the
steps after the first two (warm-up), by the wall clock, and the tokens
per second of CPU time over the same steps (tf-exec: its process's user +
system time over the whole run, warm-up included; PyTorch: this process's
over the timed steps): on a shared machine, where a run waits for a core,
the CPU-time figures are the ones to compare.  Prints both, their ratios
and the machine's load average before and after (os.getloadavg).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WARMUP = 2          # steps left out of each median


def children_cpu_s():
    """User + system seconds of this process's reaped children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tf_exec_tokens_per_s(args):
    """The median tokens/s of tf-exec's steps after WARMUP, and its tokens
    per CPU second over the whole run."""
    cpu_before = children_cpu_s()
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "train.jsonl")
        subprocess.run([args.tf_exec, "--ranks", "1", "--microbatches", str(args.microbatches),
                        "--layers", str(args.layers), "--hidden", str(args.hidden),
                        "--heads", str(args.heads), "--ffn", str(args.ffn),
                        "--context", str(args.context),
                        "--microbatch-size", str(args.microbatch_size),
                        "--steps", str(args.steps + WARMUP), "--no-freeze",
                        "--log", log, "--progress", "lines"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(log, encoding="utf-8") as f:
            steps = [json.loads(line) for line in f if line.strip()]
    tokens = (args.steps + WARMUP) * args.microbatches * args.microbatch_size * args.context
    return (statistics.median(s["tokens_per_s"] for s in steps[WARMUP:]),
            tokens / (children_cpu_s() - cpu_before))


def torch_tokens_per_s(args):
    """The median tokens/s of PyTorch eager steps after WARMUP, its tokens
    per CPU second over them, and torch's version."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    from gpt_golden import GPT, VOCAB
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model = GPT(args.layers, args.hidden, args.heads, args.ffn, args.context)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    shape = (args.microbatches, args.microbatch_size, args.context)
    tokens = torch.randint(0, VOCAB, shape)
    targets = torch.randint(0, VOCAB, shape)
    per_step = args.microbatches * args.microbatch_size * args.context
    rates, cpu = [], []
    for _ in range(args.steps + WARMUP):
        started, cpu_started = time.perf_counter(), time.process_time()
        for m in range(args.microbatches):
            logits = model(tokens[m])
            loss = F.cross_entropy(logits.view(-1, VOCAB), targets[m].reshape(-1))
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        rates.append(per_step / (time.perf_counter() - started))
        cpu.append(time.process_time() - cpu_started)
    return (statistics.median(rates[WARMUP:]), per_step * args.steps / sum(cpu[WARMUP:]),
            torch.__version__)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tf-exec", default=os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                                      "build", "executor", "tf-exec"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--microbatch-size", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    load_before = os.getloadavg()
    ours, ours_cpu = tf_exec_tokens_per_s(args)
    theirs, theirs_cpu, version = torch_tokens_per_s(args)
    load_after = os.getloadavg()
    print(f"model: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, ffn "
          f"{args.ffn}, {args.microbatches} microbatches of {args.microbatch_size} x "
          f"{args.context} tokens; median of {args.steps} steps after {WARMUP}")
    rows = [("tf-exec, 1 rank, cpu backend", f"{ours:10.1f} tokens/s  "
             f"{ours_cpu:10.1f} tokens/CPU s"),
            (f"PyTorch {version} eager, {args.threads} thread(s)",
             f"{theirs:10.1f} tokens/s  {theirs_cpu:10.1f} tokens/CPU s"),
            ("tf-exec / PyTorch", f"{ours / theirs:10.3f}           {ours_cpu / theirs_cpu:10.3f}")]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:{width}s} {value}")
    print("load average before %.2f %.2f %.2f, after %.2f %.2f %.2f" %
          (load_before + load_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
