#!/usr/bin/env python3
"""accuracy_torch.py: the accuracy study's fine-tuning arms again, written
independently in PyTorch, to try to break the study's verdicts.

It reads what tools/accuracy-study ran (config.json and the plans in its
output folder) and trains the same experiment with its own code: a GPT of
the shape docs/executor.md describes (token and position embeddings, pre-norm
blocks of causal self-attention and a GELU MLP, a final LayerNorm, a head
without bias), split into the plan's stages as tf-exec splits it, on the
same data files, with the same per-microbatch freeze ratios from the same
plans, the same phases (warm-up, ramp), the same freeze semantics (a tensor
frozen for a microbatch gets no gradient from that microbatch; one frozen in
every microbatch gets no AdamW update), and AdamW with tf-exec's settings
(lr 3e-3, betas 0.9 / 0.95, eps 1e-8, weight decay 0.01 on weights and
embeddings only).  It is a replication, not a copy: torch's own
initialisation and random numbers, windows drawn uniformly with torch's
generator, the random tensor choice (front-biased on stage 0, as tf-exec's)
drawn with torch.multinomial, the gradient-statistics choice ("stable")
implemented again here.  It pretrains its own model first, as the study
does, on the same pretraining data.

    accuracy_torch.py --study-dir DIR -o OUT [--schedule NAME] [--arms A,B,...]
                      [--pretrain-data FILE --finetune-data FILE]
                      [--pretrained FILE]

DIR is an accuracy-study output folder.  The text study's data files are in
DIR/data; the 2-rank study trains on tf-exec's built-in sources, which
`tf-exec --write-source FILE --source base|shifted` writes.  OUT gets
evaluations.csv and summary.csv in the study's columns (the predicted times
are 0 or nan, and the measured ones are this script's own: nothing here is
timed against tf-exec) and a
JSON-lines log per run.  A run whose log is already in OUT/logs is read, not
run again (a log is written only when its run ends), and --pretrained
OUT/pretrained.pt skips pretraining: an interrupted replication goes on where
it stopped.  Needs torch (tools/bootstrap.sh pytorch).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from accuracy import summary  # noqa: E402

VOCAB = 256
STABLE_DECAY, STABLE_STALE_STEPS = 0.9, 10


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, ffn, context):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, hidden), nn.Embedding(context, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.lnf = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, VOCAB, bias=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2's: N(0, 0.02), residual projections scaled by depth
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight",
                                                                        "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))

    def stage_tensors(self, stages):
        """The parameter names of each stage in tf-exec's model order, split
        as tf-exec splits the units (embeddings, L blocks, the end): stage
        s > 0 starts at block s L / stages."""
        L = len(self.blocks)
        first = [0] + [1 + s * L // stages for s in range(1, stages)] + [L + 2]
        units = [["wte.weight", "wpe.weight"]]
        for i in range(L):
            units.append(["blocks.%d.%s" % (i, n) for n in (
                "ln1.weight", "ln1.bias", "qkv.weight", "qkv.bias", "proj.weight", "proj.bias",
                "ln2.weight", "ln2.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")])
        units.append(["lnf.weight", "lnf.bias", "head.weight"])
        return [[n for u in units[first[s]:first[s + 1]] for n in u] for s in range(stages)]


def model_of(config):
    opts = config["model"]
    val = {opts[i].lstrip("-"): int(opts[i + 1]) for i in range(0, len(opts), 2)}
    hidden = val["hidden"]
    return GPT(val["layers"], hidden, val.get("heads", max(1, hidden // 32)),
               val.get("ffn", 4 * hidden), val["context"]), val["context"]


def adamw(model):
    """tf-exec's AdamW: decay on weights and embeddings, none on gains and biases."""
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if p.dim() != 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=3e-3, betas=(0.9, 0.95), eps=1e-8)


class Corpus:
    """A file's bytes with tf-exec's split: the last 5% (at least one
    sequence) held out."""

    def __init__(self, path, context):
        with open(path, "rb") as f:
            self.data = torch.tensor(list(f.read()), dtype=torch.long)
        self.context = context
        n = len(self.data)
        self.train_len = n - max(n // 20, context + 1)

    def batch(self, gen, count):
        starts = torch.randint(0, self.train_len - self.context, (count,), generator=gen)
        return self._windows(starts)

    def validation(self, index, batches, count):
        """tf-exec's held-out windows: spread evenly over the held-out bytes."""
        span = len(self.data) - self.train_len - self.context - 1
        total = count * batches
        starts = torch.tensor([self.train_len + int(span * (index * count + k) / (total - 1))
                               for k in range(count)])
        return self._windows(starts)

    def _windows(self, starts):
        idx = starts[:, None] + torch.arange(self.context + 1)[None, :]
        w = self.data[idx]
        return w[:, :-1], w[:, 1:]


def freeze_count(ratio, k):
    return 0 if not ratio > 0 else min(k, int(math.floor(min(ratio, 1.0) * k + 0.5)))


class Chooser:
    """Which tensors of a stage a microbatch freezes: "random" (weights
    falling 1.0 -> 0.1 over stage 0's tensors, uniform elsewhere) or
    "stable" (the lowest |EMA(g)| / EMA(|g|) first, stale tensors last)."""

    def __init__(self, method, stage_names, params, seed):
        self.method, self.stage_names, self.params = method, stage_names, params
        self.gen = torch.Generator().manual_seed(seed * 7919 + 17)
        self.avg_g = {n: torch.zeros_like(params[n]) for s in stage_names for n in s}
        self.avg_a = {n: torch.zeros_like(params[n]) for s in stage_names for n in s}
        self.perturbation = {n: 1.0 for s in stage_names for n in s}
        self.stale = {n: 0 for s in stage_names for n in s}

    def choose(self, stage, ratio):
        names = self.stage_names[stage]
        k = freeze_count(ratio, len(names))
        if k == 0:
            return set()
        if self.method == "stable":
            order = sorted(range(len(names)), key=lambda i: (
                self.stale[names[i]] >= STABLE_STALE_STEPS, self.perturbation[names[i]], i))
            return {names[i] for i in order[:k]}
        K = len(names)
        w = torch.tensor([1.0 - 0.9 * i / (K - 1) if stage == 0 and K > 1 else 1.0
                          for i in range(K)])
        return {names[i] for i in torch.multinomial(w, k, replacement=False,
                                                    generator=self.gen).tolist()}

    def observe(self):
        """The step's gradients into the statistics (stable only)."""
        if self.method != "stable":
            return
        for n, g_avg in self.avg_g.items():
            g = self.params[n].grad
            if g is None:
                self.stale[n] += 1
                continue
            g_avg.mul_(STABLE_DECAY).add_(g, alpha=1 - STABLE_DECAY)
            self.avg_a[n].mul_(STABLE_DECAY).add_(g.abs(), alpha=1 - STABLE_DECAY)
            scale = self.avg_a[n].sum().item()
            self.perturbation[n] = g_avg.abs().sum().item() / scale if scale > 0 else 1.0
            self.stale[n] = 0


def plan_ratios(plan_doc):
    return {(a["stage"], a["microbatch"]): a["freeze_ratio"]
            for a in plan_doc["actions"] if a["type"] in ("B", "W")}


def arm_setup(arm, study_dir, config, schedule):
    """(ratios per (stage, microbatch), tensor choice) of an arm."""
    plans = config["plans"][schedule]
    lf = json.load(open(os.path.join(study_dir, plans["lf"])))
    shape = plan_ratios(lf)
    if arm == "no-freeze":
        return {k: 0.0 for k in shape}, "random"
    if arm in ("uniform", "cap"):
        level = config["mean_plan_ratio"][schedule] if arm == "uniform" else config["cap"]
        return {k: level for k in shape}, "random"
    _, key, choice = arm.split("-")
    doc = json.load(open(os.path.join(study_dir, plans[key])))
    return plan_ratios(doc), choice


def phase_factor(step, warmup, ramp):
    if step < warmup:
        return 0.0
    return 1.0 if ramp <= 0 else min(1.0, (step - warmup + 1) / ramp)


def train_step(model, opt, params, chooser, ratios, factor, tokens, targets, M, stages):
    """One step of M microbatches: each microbatch's frozen tensors enter
    its forward detached, so its backward gives them nothing."""
    opt.zero_grad(set_to_none=True)
    frozen_slots, slots, loss_sum = 0, 0, 0.0
    per_mb = tokens.shape[0] // M
    for m in range(M):
        frozen = set()
        for s in range(stages):
            chosen = chooser.choose(s, ratios.get((s, m), 0.0) * factor)
            frozen |= chosen
            frozen_slots += len(chosen)
            slots += len(chooser.stage_names[s])
        use = {n: (p.detach() if n in frozen else p) for n, p in params.items()}
        x, y = tokens[m * per_mb:(m + 1) * per_mb], targets[m * per_mb:(m + 1) * per_mb]
        logits = torch.func.functional_call(model, use, (x,))
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1)) / M
        if loss.requires_grad:  # else every tensor is frozen: nothing to learn from it
            loss.backward()
        loss_sum += loss.item()
    opt.step()  # AdamW skips a tensor whose .grad is None: frozen in every microbatch
    chooser.observe()
    return loss_sum, frozen_slots / slots


@torch.no_grad()
def evaluate(model, corpus, M, seqs, batches=4):
    total = 0.0
    for b in range(batches):
        x, y = corpus.validation(b, batches, M * seqs)
        total += F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)).item()
    return total / batches


def pretrain(config, path, out):
    torch.manual_seed(100)
    model, context = model_of(config)
    corpus = Corpus(path, context)
    _, _, M = config["pretrain_pipeline"]
    count = M * config["pretrain_microbatch_size"]
    opt, gen = adamw(model), torch.Generator().manual_seed(100)
    for step in range(config["pretrain_steps"]):
        x, y = corpus.batch(gen, count)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        if (step + 1) % 100 == 0:
            print("pretraining step %d: loss %.4f" % (step + 1, loss.item()), flush=True)
    torch.save(model.state_dict(), os.path.join(out, "pretrained.pt"))
    return model.state_dict()


def fine_tune(config, weights, corpus, arm, seed, study_dir, schedule, log_path):
    """One run; returns its log records (tf-exec's fields the summary reads)."""
    torch.manual_seed(seed)
    model, _ = model_of(config)
    model.load_state_dict(weights)
    pipeline = dict((p[0], p) for p in config["pipelines"])[schedule]
    ranks, M = pipeline[1], pipeline[2]
    lf = json.load(open(os.path.join(study_dir, config["plans"][schedule]["lf"])))
    stages = lf["ranks"] * lf["stages_per_rank"]
    params = dict(model.named_parameters())
    ratios, method = arm_setup(arm, study_dir, config, schedule)
    chooser = Chooser(method, model.stage_tensors(stages), params, seed)
    opt, gen = adamw(model), torch.Generator().manual_seed(seed)
    steps, warmup, seqs = config["fine_tune_steps"], config["warmup"], config["microbatch_size"]
    every = max(1, steps // config["evaluations"])
    records, train_ms = [], 0.0
    for step in range(steps):
        x, y = corpus.batch(gen, M * seqs)
        factor = 0.0 if arm == "no-freeze" else phase_factor(step, warmup, config["ramp"])
        began = time.time()
        loss, share = train_step(model, opt, params, chooser, ratios, factor, x, y, M, stages)
        ms = 1e3 * (time.time() - began)
        train_ms += ms
        rec = dict(step=step + 1, loss=loss, batch_ms=ms, train_ms=train_ms,
                   tokens_per_s=M * seqs * corpus.context / (ms / 1e3), freeze_ratio=share,
                   phase="frozen" if factor == 1.0 and share > 0 else "unfrozen")
        if (step + 1) % every == 0 or step + 1 == steps:
            rec["val_loss"] = evaluate(model, corpus, M, seqs)
        records.append(rec)
    with open(log_path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return records


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study-dir", required=True, help="an accuracy-study output folder")
    ap.add_argument("-o", "--out", required=True, help="output folder (created)")
    ap.add_argument("--schedule", help="which of the study's pipelines (default the first)")
    ap.add_argument("--arms", default="no-freeze,plan-lf-random,plan-lf-stable,"
                    "plan-actcap-random,uniform,cap")
    ap.add_argument("--seeds", help="default: the study's")
    ap.add_argument("--pretrain-data", help="default: the study's data/pretrain.txt")
    ap.add_argument("--finetune-data", help="default: the study's data/finetune.txt")
    ap.add_argument("--pretrained", help="weights pretrain() saved (pretrained.pt): "
                    "start from them instead of pretraining again")
    ap.add_argument("--threads", type=int, default=2)
    return ap.parse_args()


def main():
    a = parse_args()
    with open(os.path.join(a.study_dir, "config.json")) as f:
        config = json.load(f)
    schedule = a.schedule or config["pipelines"][0][0]
    seeds = [int(s) for s in a.seeds.split(",")] if a.seeds else config["seeds"]
    arms = a.arms.split(",")
    data = {part: getattr(a, part + "_data") or os.path.join(a.study_dir, "data", part + ".txt")
            for part in ("pretrain", "finetune")}
    for part, path in data.items():
        if not os.path.isfile(path):
            sys.exit("accuracy_torch: no %s data at %s (the 2-rank study's sources: "
                     "tf-exec --write-source FILE --source %s)"
                     % (part, path, "base" if part == "pretrain" else "shifted"))
    torch.set_num_threads(a.threads)
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    began = time.time()
    weights = (torch.load(a.pretrained) if a.pretrained
               else pretrain(config, data["pretrain"], a.out))
    print("pretrained in %.0f s" % (time.time() - began), flush=True)
    corpus = Corpus(data["finetune"], model_of(config)[1])
    runs, order = {}, []
    for seed in seeds:
        for arm in arms:
            key = (schedule, arm, seed)
            path = os.path.join(a.out, "logs", "%s-%s-seed%d.jsonl" % key)
            records = (summary.read_log(path) if os.path.exists(path) else
                       fine_tune(config, weights, corpus, arm, seed, a.study_dir, schedule, path))
            runs[key] = dict(records=records,
                             evals=summary.evaluations(records, [0.0] * len(records)))
            order.append(key)
            print("  %-20s seed %d: validation %.4f" % (arm, seed,
                                                        runs[key]["evals"][-1]["val_loss"]),
                  flush=True)
    targets, rows = summary.summarise(runs, schedule, arms, seeds, config["fine_tune_steps"],
                                      {arm: math.nan for arm in arms})
    summary.write_summary(rows, os.path.join(a.out, "summary.csv"))
    summary.write_evaluations(runs, order, os.path.join(a.out, "evaluations.csv"))
    print_rows(rows, targets)
    print("(%.0f s in all, torch %s)" % (time.time() - began, torch.__version__))


def print_rows(rows, targets):
    print("\ntargets %s" % ", ".join("%.4f" % targets[p] for p in summary.TARGETS))
    for r in rows:
        print("%-20s %.4f (%.4f..%.4f) gap %+.4f (%+.4f..%+.4f) 50%%: %s, 80%%: %s" % (
            r["arm"], r["final_val_loss_mean"], r["final_val_loss_min"], r["final_val_loss_max"],
            r["gap_mean"], r["gap_min"], r["gap_max"],
            "%.0f steps (%d)" % (r["steps_to_50"], r["reached_50"]) if r["reached_50"] else "-",
            "%.0f steps (%d)" % (r["steps_to_80"], r["reached_80"]) if r["reached_80"] else "-"))


if __name__ == "__main__":
    main()
