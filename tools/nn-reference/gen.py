#!/usr/bin/env python3
"""Reference values for rawgrad's nn tests (tests/nn/), computed in float64 with numpy from
the definitions written out here (no tinygrad, no torch): the forward value of each layer and
method, the gradient of `(out + 1).square().mean()` with respect to every input by central
differences, and the state of each optimizer after three steps.

Run: python3 tools/nn-reference/gen.py > tests/nn/values.rs   (needs numpy)

Inputs are `vals(n, seed)`: multiples of 1/8 in [-1, 1], exact in float32, made the same way
by `vals` in tests/nn/main.rs.
"""
import numpy as np

def vals(n, seed):
    return np.array([((i * 7 + seed * 13) % 17 - 8) / 8.0 for i in range(n)], dtype=np.float64)

def arr(shape, seed):
    return vals(int(np.prod(shape)), seed).reshape(shape)

def loss_of(out):
    return np.mean(np.square(out + 1.0))

def numgrad(f, xs, h=1e-6):
    """Central differences of loss_of(f(*xs)) for every element of every input."""
    grads = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        it = np.nditer(x, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            old = x[idx]
            x[idx] = old + h; lp = loss_of(f(*xs))
            x[idx] = old - h; lm = loss_of(f(*xs))
            x[idx] = old
            g[idx] = (lp - lm) / (2 * h)
        grads.append(g)
    return grads

# ---- layer and method definitions -------------------------------------------------------------

def conv(x, w, b=None, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    """Direct N-d (here 1-d or 2-d) convolution, torch/tinygrad semantics (cross-correlation)."""
    nd = w.ndim - 2
    stride, pad, dil = [tuple(v)[:nd] if len(v) >= nd else tuple(v) * nd for v in (stride, pad, dil)]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    bs, cin_all = x.shape[:2]
    cout, cin = w.shape[:2]
    k = w.shape[2:]
    osz = [(xp.shape[2 + j] - dil[j] * (k[j] - 1) - 1) // stride[j] + 1 for j in range(nd)]
    out = np.zeros([bs, cout] + osz)
    rc = cout // groups
    for o in np.ndindex(*osz):
        for kk in np.ndindex(*k):
            pos = tuple(o[j] * stride[j] + kk[j] * dil[j] for j in range(nd))
            for g in range(groups):
                xs = xp[(slice(None), slice(g * cin, (g + 1) * cin)) + pos]  # (bs, cin)
                ws = w[(slice(g * rc, (g + 1) * rc), slice(None)) + kk]      # (rc, cin)
                out[(slice(None), slice(g * rc, (g + 1) * rc)) + o] += xs @ ws.T
    if b is not None:
        out += b.reshape([1, -1] + [1] * nd)
    return out

def conv_transpose(x, w, b=None, stride=1, pad=0, out_pad=0, dil=1, groups=1):
    """Transposed convolution by scattering: w is (cin, cout/groups, *k)."""
    nd = w.ndim - 2
    cin, rc = w.shape[:2]
    k = w.shape[2:]
    bs = x.shape[0]
    isz = x.shape[2:]
    full = [(isz[j] - 1) * stride + dil * (k[j] - 1) + 1 + out_pad for j in range(nd)]
    out = np.zeros([bs, rc * groups] + full)
    cg = cin // groups
    for i in np.ndindex(*isz):
        for kk in np.ndindex(*k):
            pos = tuple(i[j] * stride + kk[j] * dil for j in range(nd))
            for g in range(groups):
                xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + i]   # (bs, cg)
                ws = w[(slice(g * cg, (g + 1) * cg), slice(None)) + kk]  # (cg, rc)
                out[(slice(None), slice(g * rc, (g + 1) * rc)) + pos] += xs @ ws
    crop = tuple(slice(pad, full[j] - pad) for j in range(nd))
    out = out[(slice(None), slice(None)) + crop]
    if b is not None:
        out = out + b.reshape([1, -1] + [1] * nd)
    return out

def layernorm(x, axes, eps=1e-5):
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps)

def batchnorm_train(x, w, b, eps=1e-5):
    axes = tuple(a for a in range(x.ndim) if a != 1)
    sh = [1, -1] + [1] * (x.ndim - 2)
    m = x.mean(axis=axes)
    v = ((x - m.reshape(sh)) ** 2).mean(axis=axes)
    return (x - m.reshape(sh)) * w.reshape(sh) / np.sqrt(v.reshape(sh) + eps) + b.reshape(sh), m, v

def groupnorm(x, groups, w, b, eps=1e-5):
    y = layernorm(x.reshape(x.shape[0], groups, -1), (-1,), eps).reshape(x.shape)
    sh = [1, -1] + [1] * (x.ndim - 2)
    return y * w.reshape(sh) + b.reshape(sh)

def embedding(idx, w):
    return w[idx]

# ---- optimizers (the update rules of tinygrad 0.9.1's nn/optim.py, written out) --------------

def grad_fn(w, a, c):
    """Gradient of sum(a*w + c*w*w): a + 2 c w."""
    return a + 2 * c * w

def lars(w, a, c, steps, lr, momentum, wd, nesterov, classic, tcoef):
    b = np.zeros_like(w)
    for _ in range(steps):
        g = grad_fn(w, a, c)
        if tcoef != 0:
            r1, r2 = np.sqrt((w * w).sum()), np.sqrt((g * g).sum())
            r = (tcoef * r1 / (r2 + wd * r1)) if (r1 > 0 and r2 > 0) else 1.0
        else:
            r = 1.0
        g = g + wd * w
        if classic: g = g * r * lr
        if momentum:
            b = momentum * b + g
            g = (g + momentum * b) if nesterov else b
        if not classic: g = g * r * lr
        w = w - g
    return w, b

def lamb(w, a, c, steps, lr, b1, b2, eps, wd, adam):
    m, v = np.zeros_like(w), np.zeros_like(w)
    b1t, b2t = 1.0, 1.0
    for _ in range(steps):
        g = grad_fn(w, a, c)
        b1t *= b1; b2t *= b2
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        up = (m / (1 - b1t)) / (np.sqrt(v / (1 - b2t)) + eps) + wd * w
        if not adam:
            r1, r2 = np.sqrt((w * w).sum()), np.sqrt((up * up).sum())
            r = (r1 / r2) if (r1 > 0 and r2 > 0) else 1.0
        else:
            r = 1.0
        w = w - lr * r * up
    return w, m, v, b1t, b2t

# conv_transpose is the adjoint of conv (stride 1, no padding): <conv(x, w), y> == <x, convT(y, w)>
_x, _w = arr((1, 2, 5, 4), 90), arr((3, 2, 2, 3), 91)
_y = arr(conv(_x, _w).shape, 92)
assert abs((conv(_x, _w) * _y).sum() - (_x * conv_transpose(_y, _w)).sum()) < 1e-9

# ---- output ---------------------------------------------------------------------------------

OUT = []

def emit(name, a):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    body = ", ".join(repr(float(x)) for x in a)
    OUT.append(f"pub const {name}: &[f64] = &[{body}];")

def case(name, f, xs):
    out = f(*xs)
    emit(f"{name}_OUT", out)
    for i, g in enumerate(numgrad(f, xs)):
        emit(f"{name}_G{i}", g)

x = arr((4, 3), 1); w = arr((2, 3), 2); b = arr((2,), 3)
case("LINEAR", lambda x, w, b: x @ w.T + b, [x, w, b])

x = arr((2, 2, 5, 4), 4); w = arr((3, 2, 2, 3), 5); b = arr((3,), 6)
case("CONV2D", lambda x, w, b: conv(x, w, b, stride=(2, 2), pad=(1, 1)), [x, w, b])

x = arr((1, 4, 7, 6), 7); w = arr((2, 2, 3, 3), 8)
case("CONV2D_GROUPS", lambda x, w: conv(x, w, None, dil=(2, 2), groups=2), [x, w])

x = arr((2, 3, 7), 9); w = arr((4, 3, 3), 10); b = arr((4,), 11)
case("CONV1D", lambda x, w, b: conv(x, w, b, stride=(2,), pad=(1,)), [x, w, b])

x = arr((1, 2, 3, 4), 12); w = arr((2, 3, 3, 3), 13); b = arr((3,), 14)
case("CONVT2D", lambda x, w, b: conv_transpose(x, w, b, stride=2, pad=1, out_pad=1), [x, w, b])

x = arr((2, 4, 3), 15); w = arr((4, 1, 2), 16)
case("CONVT1D_GROUPS", lambda x, w: conv_transpose(x, w, None, dil=2, groups=2), [x, w])

x = arr((3, 2, 2, 3), 17); w = arr((2,), 18) + 1.5; b = arr((2,), 19)
case("BATCHNORM2D", lambda x, w, b: batchnorm_train(x, w, b)[0], [x, w, b])
_, m, v = batchnorm_train(x, w, b)
n, ch = x.size, x.shape[1]
emit("BATCHNORM2D_RUNNING_MEAN", 0.1 * m)
emit("BATCHNORM2D_RUNNING_VAR", 0.9 + 0.1 * n / (n - ch) * v)
rm, rv = arr((2,), 20), arr((2,), 21) + 2.0
emit("BATCHNORM2D_EVAL", (x - rm.reshape(1, -1, 1, 1)) * w.reshape(1, -1, 1, 1) / np.sqrt(rv.reshape(1, -1, 1, 1) + 1e-5) + b.reshape(1, -1, 1, 1))

x = arr((5, 3), 22); w = arr((3,), 23) + 1.25; b = arr((3,), 24)
case("BATCHNORM1D", lambda x, w, b: batchnorm_train(x, w, b)[0], [x, w, b])

x = arr((2, 2, 3), 25); w = arr((3,), 26) + 1.5; b = arr((3,), 27)
case("LAYERNORM", lambda x, w, b: layernorm(x, (-1,)) * w + b, [x, w, b])

x = arr((1, 3, 2, 2), 28); w = arr((3,), 29) + 1.5; b = arr((3,), 30)
case("LAYERNORM2D", lambda x, w, b: (layernorm(x.transpose(0, 2, 3, 1), (-1,)) * w + b).transpose(0, 3, 1, 2), [x, w, b])

x = arr((2, 4, 3), 31); w = arr((4,), 32) + 1.5; b = arr((4,), 33)
case("GROUPNORM", lambda x, w, b: groupnorm(x, 2, w, b), [x, w, b])

x = arr((2, 3, 4), 34); w = arr((3,), 35) + 1.5; b = arr((3,), 36)
case("INSTANCENORM", lambda x, w, b: groupnorm(x, 3, w, b), [x, w, b])

idx = np.array([[1, 4, 0], [2, 2, 3]]); w = arr((5, 3), 37)
case("EMBEDDING", lambda w: embedding(idx, w), [w])

a = arr((3, 4), 38); c = arr((4, 5), 39)
case("EINSUM_MM", lambda a, c: np.einsum("ij,jk->ik", a, c), [a, c])
a = arr((2, 3, 4), 40); c = arr((2, 4, 3), 41)
case("EINSUM_BMM_T", lambda a, c: np.einsum("bij,bjk->bki", a, c), [a, c])
a = arr((5,), 42); c = arr((5,), 43)
case("EINSUM_DOT", lambda a, c: np.einsum("i,i->", a, c), [a, c])
a = arr((3, 2), 44); c = arr((2, 4), 45); d = arr((4,), 46)
case("EINSUM_IMPLICIT", lambda a, c, d: np.einsum("ij,jk,k", a, c, d), [a, c, d])

w0 = arr((2, 3), 47); ga = arr((2, 3), 48); gc = arr((2, 3), 49) * 0.5 + 0.75
for name, kw in [
    ("SGD", dict(lr=0.1, momentum=0.0, wd=0.0, nesterov=False, classic=False, tcoef=0.0)),
    ("SGD_MOMENTUM_WD", dict(lr=0.1, momentum=0.9, wd=0.1, nesterov=False, classic=False, tcoef=0.0)),
    ("SGD_NESTEROV", dict(lr=0.1, momentum=0.9, wd=0.1, nesterov=True, classic=False, tcoef=0.0)),
    ("LARS", dict(lr=0.1, momentum=0.9, wd=1e-4, nesterov=False, classic=True, tcoef=0.001)),
]:
    wf, bf = lars(w0.copy(), ga, gc, 3, **kw)
    emit(f"OPT_{name}_W", wf); emit(f"OPT_{name}_B", bf)
for name, kw in [
    ("ADAM", dict(lr=0.01, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, adam=True)),
    ("ADAMW", dict(lr=0.01, b1=0.9, b2=0.999, eps=1e-8, wd=0.01, adam=True)),
    ("LAMB", dict(lr=0.01, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, adam=False)),
]:
    wf, m, v, b1t, b2t = lamb(w0.copy(), ga, gc, 3, **kw)
    emit(f"OPT_{name}_W", wf); emit(f"OPT_{name}_M", m); emit(f"OPT_{name}_V", v)
    emit(f"OPT_{name}_BT", [b1t, b2t])

print("//! Generated by tools/nn-reference/gen.py (numpy, float64); do not edit.\n")
print("#![allow(dead_code)]\n")
print("\n".join(OUT))
