//! Limb constants the CUDA kernels hard-code (kernels/cuda/field.cuh), mirrored here so unit
//! tests can derive them independently and check them against blstrs.

/// BLS12-381 scalar field modulus r, 32-bit little-endian limbs.
pub const FR_P: [u32; 8] = [
    0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402, 0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753,
];
/// R mod r with R = 2^256 (Montgomery one).
pub const FR_ONE: [u32; 8] = [
    0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa, 0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159,
];
/// R^2 mod r: the factor that takes a canonical value to its Montgomery form.
pub const FR_R2: [u32; 8] = [
    0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb, 0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9,
];
/// -r^-1 mod 2^32.
pub const FR_INV: u32 = 0xffffffff;

/// BLS12-381 base field modulus p, 32-bit little-endian limbs.
pub const FP_P: [u32; 12] = [
    0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84,
    0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea,
];
/// R mod p with R = 2^384.
pub const FP_ONE: [u32; 12] = [
    0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857, 0x70525745, 0x77ce5853,
    0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3,
];
/// -p^-1 mod 2^32.
pub const FP_INV: u32 = 0xfffcfffd;

/// -m^-1 mod 2^32 for odd m0 (Newton iteration), as the kernels' Montgomery reduction needs.
pub fn neg_inv32(m0: u32) -> u32 {
    assert!(m0 & 1 == 1, "modulus must be odd");
    let mut x: u32 = 1;
    for _ in 0..5 {
        x = x.wrapping_mul(2u32.wrapping_sub(m0.wrapping_mul(x)));
    }
    x.wrapping_neg()
}

/// 2^(32·n) mod m for an n-limb modulus m, by repeated doubling (schoolbook, test use only).
pub fn r_mod<const N: usize>(m: &[u32; N]) -> [u32; N] {
    pow2_mod(m, 32 * N)
}

/// 2^bits mod m, by repeated doubling.
pub fn pow2_mod<const N: usize>(m: &[u32; N], bits: usize) -> [u32; N] {
    // start at 1, double `bits` times with reduction.
    let mut x = [0u32; N];
    x[0] = 1;
    for _ in 0..bits {
        let mut carry = 0u32;
        for l in x.iter_mut() {
            let v = ((*l as u64) << 1) | carry as u64;
            *l = v as u32;
            carry = (v >> 32) as u32;
        }
        if carry == 1 || !lt(&x, m) {
            let mut borrow = 0i64;
            for (l, &ml) in x.iter_mut().zip(m) {
                let v = *l as i64 - ml as i64 - borrow;
                *l = v as u32;
                borrow = (v < 0) as i64;
            }
        }
    }
    x
}

/// Little-endian limb comparison a < b.
pub fn lt<const N: usize>(a: &[u32; N], b: &[u32; N]) -> bool {
    for i in (0..N).rev() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{Fp, Scalar};
    use ff::{Field, PrimeField};

    fn limbs_from_hex<const N: usize>(hex: &str) -> [u32; N] {
        let hex = hex.trim_start_matches("0x");
        let mut out = [0u32; N];
        let digits: Vec<u8> = hex.bytes().rev().collect();
        for (i, chunk) in digits.chunks(8).enumerate() {
            let s: String = chunk.iter().rev().map(|&c| c as char).collect();
            out[i] = u32::from_str_radix(&s, 16).unwrap();
        }
        out
    }

    fn scalar_raw(s: &Scalar) -> [u32; 8] {
        // blstrs keeps Montgomery limbs; the kernels read the same bytes.
        // SAFETY: `Scalar` is `repr(transparent)` over blst's 4×u64 limbs: 32 plain bytes.
        let bytes: [u8; 32] = unsafe { std::mem::transmute(*s) };
        std::array::from_fn(|i| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap()))
    }

    #[test]
    fn fr_constants_match_blstrs() {
        assert_eq!(FR_P, limbs_from_hex::<8>(Scalar::MODULUS));
        assert_eq!(FR_INV, neg_inv32(FR_P[0]));
        assert_eq!(FR_ONE, r_mod(&FR_P));
        assert_eq!(scalar_raw(&Scalar::ONE), FR_ONE);
        // R² mod r is the Montgomery form of R mod r.
        assert_eq!(FR_R2, pow2_mod(&FR_P, 512));
        let mut r = [0u8; 32];
        for (b, l) in r.chunks_exact_mut(4).zip(FR_ONE) {
            b.copy_from_slice(&l.to_le_bytes());
        }
        assert_eq!(scalar_raw(&Scalar::from_repr_vartime(r).unwrap()), FR_R2);
    }

    #[test]
    fn fp_constants_match_blstrs() {
        // p - 1 = -1 in canonical form, from blstrs
        let m1 = (-Fp::ONE).to_bytes_le();
        let mut m1: [u32; 12] =
            std::array::from_fn(|i| u32::from_le_bytes(m1[4 * i..4 * i + 4].try_into().unwrap()));
        m1[0] += 1;
        assert_eq!(FP_P, m1);
        assert_eq!(FP_INV, neg_inv32(FP_P[0]));
        assert_eq!(FP_ONE, r_mod(&FP_P));
        // SAFETY: `Fp` is `repr(transparent)` over blst's 6×u64 limbs: 48 plain bytes.
        let one: [u8; 48] = unsafe { std::mem::transmute(Fp::ONE) };
        let one: [u32; 12] =
            std::array::from_fn(|i| u32::from_le_bytes(one[4 * i..4 * i + 4].try_into().unwrap()));
        assert_eq!(one, FP_ONE);
    }

    #[test]
    fn neg_inv_is_inverse() {
        for m in [1u32, 3, 0xffffaaab, 0x12345677] {
            assert_eq!(m.wrapping_mul(neg_inv32(m)), u32::MAX);
        }
    }
}
