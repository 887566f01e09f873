#!/usr/bin/env python3
"""Reproducible coefficient fitting for kernels/detmath.h.

Usage: /usr/bin/python3 scripts/fit_detmath.py

Method (no external libraries beyond numpy, no copied coefficients):
  * The target functions are evaluated from their Taylor series or from np.longdouble
    libm calls, so no cancellation spoils the reference.
  * A weighted minimax polynomial is found with Lawson's algorithm (iteratively
    reweighted least squares) on a dense grid of Chebyshev nodes.
  * Coefficients are then rounded to float32 one at a time, lowest degree first; after
    each rounding the remaining (higher) coefficients are re-fitted, which absorbs most of
    the rounding error.
  * Constants (ln2, pi/2, 2/pi bits) are derived from exact integer arithmetic.
Prints every constant as a C float hex literal, ready to paste into detmath.h.
The error each fit prints is the error of the real-valued polynomial with float32
coefficients; the ULP errors stated in detmath.h are measured by
tests/kernels/detmath_test.cc on the float32 implementation.
"""
import math
from fractions import Fraction

import numpy as np

LD = np.longdouble


def f32(v):
    return float(np.float32(v))


def hexf(v):
    """float32 value -> C hex float literal '0x1.xxxxxxp+e'."""
    v = f32(v)
    if v == 0.0:
        return "0x0p+0f"
    s = "-" if v < 0 else ""
    m, e = math.frexp(abs(v))  # v = m * 2^e, m in [0.5,1)
    m *= 2.0
    e -= 1
    mant = int(round((m - 1.0) * (1 << 24)))  # 24 bits = 6 hex digits (last bit always 0)
    return "%s0x1.%06xp%+df" % (s, mant, e)


# ---------------------------------------------------------------------------
# exact constants from integer arithmetic
PREC = 400
ONE = 1 << PREC


def atan_inv(n):  # atan(1/n) in fixed point
    total, term, k, sign = 0, ONE // n, 1, 1
    n2 = n * n
    while term:
        total += sign * (term // k)
        term //= n2
        k += 2
        sign = -sign
    return total


PI_FIX = 16 * atan_inv(5) - 4 * atan_inv(239)  # pi * 2^PREC
LN2_FIX = sum(ONE // (k << k) for k in range(1, PREC + 10))  # ln2 = sum 1/(k 2^k)
PI = Fraction(PI_FIX, ONE)
LN2 = Fraction(LN2_FIX, ONE)


def split_f32(x, parts, hi_bits=24):
    """Split the exact Fraction x into float32 parts; the first has hi_bits significant bits."""
    out = []
    rem = x
    for i in range(parts):
        if rem == 0:
            out.append(0.0)
            continue
        e = math.floor(math.log2(abs(float(rem))))
        nb = hi_bits if i == 0 else 24
        scale = Fraction(2) ** (nb - 1 - e)
        q = round(rem * scale)
        v = Fraction(q) / scale
        out.append(float(v))
        rem -= v
    return out


def two_over_pi_words(nwords, pad_words=1):
    """Bits of 2/pi after the binary point, preceded by pad_words zero words."""
    nbits = 32 * nwords
    val = (2 * ONE * (1 << nbits)) // PI_FIX  # floor(2/pi * 2^nbits), 2/pi < 1
    words = [(val >> (32 * (nwords - 1 - i))) & 0xFFFFFFFF for i in range(nwords)]
    return [0] * pad_words + words


# ---------------------------------------------------------------------------
# fitting
def cheb_nodes(a, b, n):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def lawson(xs, fs, ws, powers, fixed=None, iters=300):
    """Weighted minimax fit fs ~ sum_j c_j xs^powers[j]; error weighted by ws.
    fixed: dict index->value for coefficients already fixed."""
    fixed = fixed or {}
    free = [j for j in range(len(powers)) if j not in fixed]
    target = fs.copy()
    for j, v in fixed.items():
        target = target - v * xs ** powers[j]
    A = np.stack([xs ** powers[j] for j in free], axis=1)
    lam = np.ones_like(xs) / len(xs)
    best = None
    for _ in range(iters):
        sw = np.sqrt(lam) * ws
        c, *_ = np.linalg.lstsq(A * sw[:, None], target * sw, rcond=None)
        err = np.abs((A @ c - target) * ws)
        m = err.max()
        if best is None or m < best[0]:
            best = (m, c.copy())
        lam = lam * err
        s = lam.sum()
        if s == 0:
            break
        lam /= s
    coeffs = [0.0] * len(powers)
    for j, v in fixed.items():
        coeffs[j] = v
    for j, v in zip(free, best[1]):
        coeffs[j] = float(v)
    return coeffs


def fit_f32(name, xs, fs, ws, powers):
    fixed = {}
    for j in range(len(powers)):
        c = lawson(xs, fs, ws, powers, fixed)
        fixed[j] = f32(c[j])
    coeffs = [fixed[j] for j in range(len(powers))]
    approx = sum(c * xs ** p for c, p in zip(coeffs, powers))
    err = np.max(np.abs((approx - fs) * ws))
    print("// %s: max weighted error %.3e (= %.3f ulp-ish at 2^-24)" % (name, err, err * 2**24))
    for c in coeffs:
        print("    %s," % hexf(c))
    return coeffs


def series(coef_fn, x, nterms):
    x = np.asarray(x, dtype=LD)
    s = np.zeros_like(x)
    for n in reversed(range(nterms)):
        s = s * x + LD(coef_fn(n))
    return s


def fact(n):
    return math.factorial(n)


N = 4000


def main():
    print("// ---- constants")
    ln2 = split_f32(LN2, 2)
    print("kLn2Hi = %s, kLn2Lo = %s" % (hexf(ln2[0]), hexf(ln2[1])))
    ln2s = split_f32(LN2, 3, hi_bits=16)
    print("kLn2Hi16 = %s, kLn2Lo16 = %s, kLn2Lo16b = %s  (hi has 16 bits: e*hi exact for |e|<=255)"
          % (hexf(ln2s[0]), hexf(ln2s[1]), hexf(ln2s[2])))
    print("kLog2e = %s" % hexf(float(1 / LN2)))
    pio2 = split_f32(PI / 2, 2)
    print("kPio2Hi = %s, kPio2Lo = %s" % (hexf(pio2[0]), hexf(pio2[1])))
    print("kPio4 = %s (float below pi/4: %r)" % (hexf(float(PI / 4)), float(np.float32(float(PI / 4)))))
    print("kInvSqrtPi*2 = %s" % hexf(float(2 / PI) ** 0.5))
    words = two_over_pi_words(8)
    print("2/pi words (1 zero pad word):")
    print("    " + ", ".join("0x%08Xu" % w for w in words))

    # exp: e^r = 1 + r + r^2 Q(r), |r| <= ln2/2 (+ margin)
    a = 0.3466 + 1e-3
    x = cheb_nodes(-a, a, N).astype(LD)
    q = series(lambda n: Fraction(1, fact(n + 2)), x, 30)
    w = (x * x / np.exp(x)).astype(float)
    fit_f32("exp Q(r), r in [-ln2/2, ln2/2]", x.astype(float), q.astype(float), w, list(range(6)))

    # log: log1p(f) = f + f^2 Q(f), f in [sqrt(1/2)-1, sqrt(2)-1]
    lo, hi = math.sqrt(0.5) - 1 - 1e-7, math.sqrt(2) - 1 + 1e-7
    x = cheb_nodes(lo, hi, N).astype(LD)
    q = series(lambda n: Fraction((-1) ** (n + 1), n + 2), x, 400)
    w = (x * x / np.abs(np.log1p(x))).astype(float)
    fit_f32("log Q(f)", x.astype(float), q.astype(float), w, list(range(10)))

    # tanh: tanh(x) = x + x^3 P(x^2), x in [0, T]
    T = 0.625
    t = cheb_nodes(0.0, T * T, N).astype(LD)
    xx = np.sqrt(t)
    small = xx < 0.02
    p = np.where(small,
                 LD(-1) / 3 + t * (LD(2) / 15 + t * (LD(-17) / 315 + t * LD(62) / 2835)),
                 (np.tanh(xx) - xx) / (xx ** 3 + (xx == 0)))
    w = (xx ** 3 / np.where(xx == 0, 1, np.tanh(xx))).astype(float)
    w = np.where(xx == 0, 0, w)
    fit_f32("tanh P(x^2), x in [0,%g]" % T, t.astype(float), p.astype(float), w, list(range(7)))

    # erf small: erf(x) = x + x Q(x^2), x in [0, 1]
    t = cheb_nodes(0.0, 1.0, N).astype(LD)
    g = series(lambda n: Fraction((-1) ** n, fact(n) * (2 * n + 1)), t, 40) * LD(2) / np.sqrt(LD(np.pi)) - 1
    xx = np.sqrt(t)
    w = (xx / np.where(xx == 0, 1, xx * (1 + g))).astype(float)
    fit_f32("erf Q(x^2), x in [0,1]", t.astype(float), g.astype(float), w, list(range(8)))

    # erf large: 1 - erf(x) = exp(P(x)), x in [1, 4]; error weighted by erfc/erf
    for (a, b, deg) in [(1.0, 2.25, 9), (2.25, 4.0, 9)]:
        x = cheb_nodes(a, b, N)
        erfc = np.array([math.erfc(v) for v in x])
        lg = np.log(erfc)
        w = erfc / (1 - erfc)
        # fit in the shifted variable u = x - a so the coefficients stay well scaled
        fit_f32("erf log(erfc(a+u)), x in [%g,%g]" % (a, b), x - a, lg, w, list(range(deg + 1)))

    # sin: sin(r) = r + r^3 S(r^2), r in [0, pi/4]
    a = math.pi / 4 + 1e-6
    t = cheb_nodes(0.0, a * a, N).astype(LD)
    s = series(lambda n: Fraction((-1) ** (n + 1), fact(2 * n + 3)), t, 20)
    xx = np.sqrt(t)
    w = (xx ** 3 / np.where(xx == 0, 1, np.sin(xx))).astype(float)
    fit_f32("sin S(r^2)", t.astype(float), s.astype(float), w, list(range(4)))
    # cos: cos(r) = 1 - r^2/2 + r^4 C(r^2)
    c = series(lambda n: Fraction((-1) ** n, fact(2 * n + 4)), t, 20)
    w = (t * t / np.cos(xx)).astype(float)
    fit_f32("cos C(r^2)", t.astype(float), c.astype(float), w, list(range(4)))

    # pow log: 2 atanh(s) = 2s + (2/3) s^3 + s^5 R(s^2), |s| <= (sqrt2-1)/(sqrt2+1)
    smax = (math.sqrt(2) - 1) / (math.sqrt(2) + 1) + 1e-6
    t = cheb_nodes(0.0, smax * smax, N).astype(LD)
    r = series(lambda n: Fraction(2, 2 * n + 5), t, 60)
    xx = np.sqrt(t)
    w = (xx ** 5 / (2 * xx + (xx == 0))).astype(float)
    fit_f32("pow-log R(s^2)", t.astype(float), r.astype(float), w, list(range(4)))
    tt = Fraction(2, 3)
    two3 = split_f32(tt, 2)
    print("k2over3Hi = %s, k2over3Lo = %s" % (hexf(two3[0]), hexf(two3[1])))


if __name__ == "__main__":
    main()
