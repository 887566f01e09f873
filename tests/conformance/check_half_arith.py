# Recomputes exact outputs of the golden vectors tests/conformance/vectors/f16_arith and
# bf16_arith independently, from DETERMINISM.md sections 1.1, 1.3, 1.4 and 2: each 16-bit input
# widened to f32, the op in numpy's f32 (IEEE, round to nearest even), the result rounded once
# to the 16-bit type by numpy (f16) or torch (bf16), NaN canonical (0x7E00, 0x7FC0,
# 0x7FC00000), and compares the tensor hashes. Transcendental outputs are left to the kernel
# tests (they use the f32 detmath).
#   /usr/bin/python3 tests/conformance/check_half_arith.py tests/conformance/vectors/f16_arith f16
import sys
import numpy as np
from vector_check import compare
d, kind = sys.argv[1], sys.argv[2]
CODE = {'f16': 12, 'bf16': 13}
CANON16 = {'f16': 0x7E00, 'bf16': 0x7FC0}


def to_f32(bits, k):
    """16-bit patterns -> f32 values (exact), NaN canonical."""
    if k == 'f16':
        f = bits.view(np.float16).astype(np.float32)
    else:
        f = (bits.astype(np.uint32) << 16).view(np.float32)
    f = f.copy()
    f[np.isnan(f)] = np.float32(np.nan)
    return f


def from_f32(f, k):
    """f32 values -> 16-bit patterns, round to nearest even, NaN canonical."""
    if k == 'f16':
        with np.errstate(all='ignore'):
            bits = f.astype(np.float16).view(np.uint16).copy()
    else:
        import torch
        bits = torch.from_numpy(np.ascontiguousarray(f)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).copy()
    bits[np.isnan(f)] = CANON16[k]
    return bits


def canon32(f):
    f = np.array(f, dtype=np.float32)
    f[np.isnan(f)] = np.array([0x7FC00000], dtype=np.uint32).view(np.float32)[0]
    return f


def maxf(x, y):
    both_zero = (x == 0) & (y == 0)
    r = np.where(x > y, x, y)
    r = np.where(both_zero, np.where(np.signbit(x) & np.signbit(y), np.float32(-0.0), np.float32(0.0)), r)
    return np.where(np.isnan(x) | np.isnan(y), np.float32(np.nan), r).astype(np.float32)


raw = {n: np.load(d + '/inputs/%s.npy' % n) for n in ('a', 'b', 'f')}
a_bits, b_bits = raw['a'].view(np.uint16), raw['b'].view(np.uint16)
a, b, f = to_f32(a_bits, kind), to_f32(b_bits, kind), raw['f']
h = lambda v: from_f32(np.asarray(v, dtype=np.float32), kind)
other = 'bf16' if kind == 'f16' else 'f16'
with np.errstate(all='ignore'):
    na = -a
    aa = np.abs(na)
    want = {
        'add': (h(a + b), CODE[kind]), 'mul': (h(a * b), CODE[kind]), 'div': (h(a / b), CODE[kind]),
        'max': (h(maxf(a, b)), CODE[kind]),
        'neg_abs_relu': (h(np.where(np.isnan(aa), np.float32(np.nan), np.where(aa > 0, aa, np.float32(0)))), CODE[kind]),
        'sqrt': (h(np.sqrt(a)), CODE[kind]), 'round': (h(np.rint(a)), CODE[kind]),
        'lt': (a < b, 4), 'where': (np.where(a > b, a_bits, b_bits), CODE[kind]),
        'to_f32': (canon32(a), 1), 'from_f32': (from_f32(f, kind), CODE[kind]),
        'to_other': (from_f32(a, other), CODE[other]),
    }
sys.exit(compare(want, d))
