// Short Weierstrass curves with a = 0 (BLS12-381 G1 over Fp, G2 over Fp2), XYZZ coordinates
// (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2), formulas from the EFD (madd-2008-s, add-2008-s,
// mdbl-2008-s, dbl-2008-s). Identity: ZZ = ZZZ = 0. Affine identity (blst layout): x = y = 0.
#pragma once
#include "field.cuh"

template <class F>
struct alignas(16) Affine {
    F x, y;
    DEVI bool is_inf() const { return x.is_zero() && y.is_zero(); }
};

// An affine sum once its denominator's inverse is known (the batch-affine accumulation,
// msm_affine.cuh): (x, y) + (px, py) with inv = 1/(px − x), or with `dbl` 2·(x, y) with
// inv = 1/(2y).
template <class F>
DEVI Affine<F> affine_sum(bool dbl, const F& x, const F& y, const F& px, const F& py, const F& inv) {
    F lam, nx;
    if (!dbl) {
        lam = (py - y) * inv;
        nx = lam.sqr() - x - px;
    } else {
        const F xx = x.sqr();
        lam = (xx.dbl() + xx) * inv;
        nx = lam.sqr() - x.dbl();
    }
    return {nx, lam * (x - nx) - y};
}

template <class F>
struct alignas(16) Xyzz {
    F X, Y, ZZ, ZZZ;

    static DEVI Xyzz inf() { return {F::zero(), F::zero(), F::zero(), F::zero()}; }
    DEVI bool is_inf() const { return ZZ.is_zero(); }

    static DEVI Xyzz from_affine(const F& x, const F& y) { return {x, y, F::one(), F::one()}; }

    // mdbl-2008-s: 2·(x, y)
    static DEVI Xyzz dbl_affine(const F& x, const F& y) {
        F U = y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = x * V;
        F xx = x.sqr();
        F M = xx.dbl() + xx;
        Xyzz r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * y;
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }

    // dbl-2008-s
    DEVI void dbl() {
        if (is_inf()) return;
        F U = Y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = X * V;
        F xx = X.sqr();
        F M = xx.dbl() + xx;
        F X3 = M.sqr() - S.dbl();
        Y = M * (S - X3) - W * Y;
        X = X3;
        ZZ = V * ZZ;
        ZZZ = W * ZZZ;
    }

    // madd-2008-s: this += (x2, y2); (x2, y2) is not the identity.
    DEVI void add_affine(const F& x2, const F& y2) {
        if (is_inf()) {
            *this = from_affine(x2, y2);
            return;
        }
        F U2 = x2 * ZZ;
        F S2 = y2 * ZZZ;
        F P = U2 - X;
        F R = S2 - Y;
        if (P.is_zero()) {
            if (R.is_zero()) *this = dbl_affine(x2, y2);
            else *this = inf();
            return;
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = X * PP;
        F X3 = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X3) - Y * PPP;
        X = X3;
        ZZ = ZZ * PP;
        ZZZ = ZZZ * PPP;
    }

    // add-2008-s: this += q
    DEVI void add(const Xyzz& q) {
        if (q.is_inf()) return;
        if (is_inf()) {
            *this = q;
            return;
        }
        F U1 = X * q.ZZ;
        F U2 = q.X * ZZ;
        F S1 = Y * q.ZZZ;
        F S2 = q.Y * ZZZ;
        F P = U2 - U1;
        F R = S2 - S1;
        if (P.is_zero()) {
            if (R.is_zero()) dbl();
            else *this = inf();
            return;
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = U1 * PP;
        F X3 = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X3) - S1 * PPP;
        X = X3;
        ZZ = ZZ * q.ZZ * PP;
        ZZZ = ZZZ * q.ZZZ * PPP;
    }

    // Jacobian (X', Y', Z') with x = X'/Z'^2, y = Y'/Z'^3, no inversion:
    // Z' = ZZ·ZZZ, X' = X·ZZ·ZZZ^2, Y' = Y·ZZ^3·ZZZ^2. Identity -> Z' = 0.
    DEVI void to_jacobian(F* out) const {
        F zzz2 = ZZZ.sqr();
        F zz3 = ZZ.sqr() * ZZ;
        out[0] = X * ZZ * zzz2;
        out[1] = Y * zz3 * zzz2;
        out[2] = ZZ * ZZZ;
    }
};
