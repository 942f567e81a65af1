#!/usr/bin/python3
"""make_golden.py: writes the golden files the model tests compare against, computed by PyTorch.

An independent implementation of the same two models (GPT-2 and LLaMA-style with grouped-query attention),
written from the papers' equations in float64, produces the loss and every parameter's gradient for fixed
weights and tokens. Run once with Debian's python3-torch (`apt-get install python3-torch`):

    /usr/bin/python3 tests/reference/make_golden.py

The outputs (gpt2_tiny.golden, llama_tiny.golden) are committed; CI only reads them. Each is a safetensors
file: 8-byte little-endian header length, a JSON header, then raw little-endian float32/int32 data.
"""
import json
import math
import os
import struct

import torch

torch.manual_seed(1234)
HERE = os.path.dirname(os.path.abspath(__file__))


def layer_names(arch):
    if arch == "gpt2":
        return ["ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb"]
    return ["ln1w", "qkvw", "attprojw", "ln2w", "fcw", "fcprojw"]


def make_weights(cfg):
    """Random weights of a useful size (std 0.3) in the registry's order and shapes."""
    C, L, V, Vp, T, NH, KVH, F = (cfg[k] for k in ("C", "L", "V", "Vp", "maxT", "NH", "KVH", "F"))
    HS = C // NH
    qkv = (NH + 2 * KVH) * HS
    fc_in = 2 * F if cfg["arch"] == "llama" else F
    shapes = {"ln1w": (C,), "ln1b": (C,), "qkvw": (qkv, C), "qkvb": (qkv,), "attprojw": (C, C), "attprojb": (C,),
              "ln2w": (C,), "ln2b": (C,), "fcw": (fc_in, C), "fcb": (fc_in,), "fcprojw": (C, F), "fcprojb": (C,)}
    w = {}

    def rand(*shape):
        return (0.3 * torch.randn(*shape, dtype=torch.float64)).requires_grad_(True)

    w["wte"] = rand(Vp, C)
    if cfg["arch"] == "gpt2":
        w["wpe"] = rand(T, C)
    for l in range(L):
        for n in layer_names(cfg["arch"]):
            t = rand(*shapes[n])
            if n in ("ln1w", "ln2w"):
                t = (1.0 + t.detach()).requires_grad_(True)
            w[f"h.{l}.{n}"] = t
    w["lnfw"] = (1.0 + 0.3 * torch.randn(C, dtype=torch.float64)).requires_grad_(True)
    if cfg["arch"] == "gpt2":
        w["lnfb"] = rand(C)
    if not cfg["tied"]:
        w["head"] = rand(Vp, C)
    with torch.no_grad():  # padded vocabulary rows are zero, as the model keeps them
        w["wte"][cfg["V"]:] = 0
        if "head" in w:
            w["head"][cfg["V"]:] = 0
    return w


def layernorm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def rmsnorm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def rope(x, theta):
    """x (B, heads, T, HS): rotate pairs (i, i + HS/2) by t * theta^(-2i/HS)."""
    B, H, T, HS = x.shape
    half = HS // 2
    freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / HS)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def forward(cfg, w, idx, targets):
    B, T = idx.shape
    C, NH, KVH, F, V, eps = cfg["C"], cfg["NH"], cfg["KVH"], cfg["F"], cfg["V"], cfg["eps"]
    HS = C // NH
    llama = cfg["arch"] == "llama"
    x = w["wte"][idx]
    if not llama:
        x = x + w["wpe"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(cfg["L"]):
        p = lambda n: w[f"h.{l}.{n}"]
        h = rmsnorm(x, p("ln1w"), eps) if llama else layernorm(x, p("ln1w"), p("ln1b"), eps)
        qkv = h @ p("qkvw").T + (0 if llama else p("qkvb"))
        q = qkv[..., : NH * HS].view(B, T, NH, HS).transpose(1, 2)
        k = qkv[..., NH * HS: (NH + KVH) * HS].view(B, T, KVH, HS).transpose(1, 2)
        v = qkv[..., (NH + KVH) * HS:].view(B, T, KVH, HS).transpose(1, 2)
        if llama:
            q, k = rope(q, cfg["theta"]), rope(k, cfg["theta"])
        rep = NH // KVH
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(HS)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p("attprojw").T + (0 if llama else p("attprojb"))
        h = rmsnorm(x, p("ln2w"), eps) if llama else layernorm(x, p("ln2w"), p("ln2b"), eps)
        f = h @ p("fcw").T + (0 if llama else p("fcb"))
        f = torch.nn.functional.silu(f[..., :F]) * f[..., F:] if llama else gelu_tanh(f)
        x = x + f @ p("fcprojw").T + (0 if llama else p("fcprojb"))
    x = rmsnorm(x, w["lnfw"], eps) if llama else layernorm(x, w["lnfw"], w["lnfb"], eps)
    head = w["wte"] if cfg["tied"] else w["head"]
    logits = (x @ head.T)[..., :V]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        blob = struct.pack("<%d%s" % (len(data), "f" if dtype == "F32" else "i"), *data)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def golden(name, cfg, B, T):
    w = make_weights(cfg)
    idx = torch.randint(0, cfg["V"], (B, T))
    targets = torch.randint(0, cfg["V"], (B, T))
    targets[0, 1] = -1  # an ignored position
    loss = forward(cfg, w, idx, targets)
    loss.backward()
    flat = lambda t: t.detach().reshape(-1).tolist()
    tensors = {"inputs": ("I32", (B, T), idx.reshape(-1).tolist()), "targets": ("I32", (B, T), targets.reshape(-1).tolist())}
    for n, t in w.items():
        tensors[n] = ("F32", tuple(t.shape), flat(t))
    for n, t in w.items():
        tensors["grad." + n] = ("F32", tuple(t.shape), flat(t.grad))
    meta = {k: str(v) for k, v in cfg.items()}
    meta["loss"] = repr(loss.item())
    meta["made_by"] = "tests/reference/make_golden.py with torch " + torch.__version__ + " in float64"
    write_safetensors(os.path.join(HERE, name), tensors, meta)
    print(f"{name}: loss {loss.item():.6f}, {len(w)} tensors")


golden("gpt2_tiny.golden", dict(arch="gpt2", V=37, Vp=37, maxT=8, L=2, C=16, NH=4, KVH=4, F=64, tied=True,
                               eps=1e-5, theta=10000.0), B=2, T=6)
golden("llama_tiny.golden", dict(arch="llama", V=37, Vp=37, maxT=8, L=2, C=16, NH=4, KVH=2, F=24, tied=False,
                                eps=1e-5, theta=10000.0), B=2, T=6)
