//! SHA-256 as bellperson's gadget allocates it (`gadgets::sha256`, `uint32`, `boolean`), computed
//! word-wide. A [`Word`] is 32 `Boolean`s: each bit a constant or an allocated bit, possibly
//! negated (`Boolean::Not`). Which bits are constant is fixed by the circuit, never by values, so
//! every op folds constants exactly where the gadget does and allocates the same variables in
//! the same order; only the values come from the data. The common case (no constant bit among
//! the operands) takes a branch-free path.

use super::out::Out;

const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// A `UInt32`, bit i = bit i of the masks. `val` is the underlying value (a constant's value,
/// or the allocated variable's value, before negation); `neg` marks `Boolean::Not` bits and is
/// zero on constant bits; `cst` marks constant bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Word {
    val: u32,
    neg: u32,
    cst: u32,
}

impl Word {
    pub(crate) const fn constant(v: u32) -> Self {
        Word {
            val: v,
            neg: 0,
            cst: u32::MAX,
        }
    }

    /// Allocated bits, except the constant ones in `cst` (which hold `v`'s bits there).
    pub(crate) const fn mixed(v: u32, cst: u32) -> Self {
        Word {
            val: v,
            neg: 0,
            cst,
        }
    }

    #[cfg(test)]
    pub(crate) const fn negated(self, mask: u32) -> Self {
        let mask = mask & !self.cst;
        Word {
            val: self.val,
            neg: self.neg ^ mask,
            cst: self.cst,
        }
    }

    /// The value the bits stand for.
    pub(crate) const fn value(self) -> u32 {
        self.val ^ self.neg
    }

    fn rotr(self, n: u32) -> Self {
        Word {
            val: self.val.rotate_right(n),
            neg: self.neg.rotate_right(n),
            cst: self.cst.rotate_right(n),
        }
    }

    fn shr(self, n: u32) -> Self {
        Word {
            val: self.val >> n,
            neg: self.neg >> n,
            cst: (self.cst >> n) | !(u32::MAX >> n),
        }
    }
}

/// One bit, for the ops whose folding rules need case analysis.
#[derive(Clone, Copy)]
enum Bit {
    Const(bool),
    Var { val: bool, neg: bool },
}

impl Bit {
    fn of(w: Word, i: u32) -> Self {
        let get = |m: u32| (m >> i) & 1 == 1;
        if get(w.cst) {
            Bit::Const(get(w.val))
        } else {
            Bit::Var {
                val: get(w.val),
                neg: get(w.neg),
            }
        }
    }

    fn value(self) -> bool {
        match self {
            Bit::Const(b) => b,
            Bit::Var { val, neg } => val ^ neg,
        }
    }

    fn not(self) -> Self {
        match self {
            Bit::Const(b) => Bit::Const(!b),
            Bit::Var { val, neg } => Bit::Var { val, neg: !neg },
        }
    }

    fn alloc(out: &mut Out, v: bool) -> Self {
        out.bit(v);
        Bit::Var { val: v, neg: false }
    }

    /// `Boolean::and`: constants fold; otherwise one variable holding the result.
    fn and(out: &mut Out, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::Const(false), _) | (_, Bit::Const(false)) => Bit::Const(false),
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x,
            _ => Bit::alloc(out, a.value() & b.value()),
        }
    }

    /// `Boolean::sha256_ch`, its match arms in the gadget's order.
    fn ch(out: &mut Out, a: Bit, b: Bit, c: Bit) -> Bit {
        let v = (a.value() & b.value()) ^ (!a.value() & c.value());
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Bit::Const(v),
            (Bit::Const(false), _, c) => c,
            (a, Bit::Const(false), c) => Bit::and(out, a.not(), c),
            (a, b, Bit::Const(false)) => Bit::and(out, a, b),
            (a, b, Bit::Const(true)) => Bit::and(out, a, b.not()).not(),
            (a, Bit::Const(true), c) => Bit::and(out, a.not(), c.not()).not(),
            _ => Bit::alloc(out, v),
        }
    }

    /// `Boolean::sha256_maj`; the general case allocates the result, then `b and c`.
    fn maj(out: &mut Out, a: Bit, b: Bit, c: Bit) -> Bit {
        let v = (a.value() & b.value()) ^ (a.value() & c.value()) ^ (b.value() & c.value());
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Bit::Const(v),
            (Bit::Const(false), b, c) => Bit::and(out, b, c),
            (a, Bit::Const(false), c) => Bit::and(out, a, c),
            (a, b, Bit::Const(false)) => Bit::and(out, a, b),
            (a, b, Bit::Const(true)) => Bit::and(out, a.not(), b.not()).not(),
            (a, Bit::Const(true), c) => Bit::and(out, a.not(), c.not()).not(),
            (Bit::Const(true), b, c) => Bit::and(out, b.not(), c.not()).not(),
            _ => {
                let r = Bit::alloc(out, v);
                Bit::and(out, b, c);
                r
            }
        }
    }
}

/// Assembles a word from bits, lowest first.
fn word_of(bits: impl Iterator<Item = Bit>) -> Word {
    let mut w = Word::constant(0);
    for (i, b) in bits.enumerate() {
        let m = 1u32 << i;
        match b {
            Bit::Const(v) => w.val |= if v { m } else { 0 },
            Bit::Var { val, neg } => {
                w.cst &= !m;
                w.val |= if val { m } else { 0 };
                w.neg |= if neg { m } else { 0 };
            }
        }
    }
    w
}

/// `UInt32::xor`: a variable per bit where neither side is constant.
fn xor(out: &mut Out, a: Word, b: Word) -> Word {
    let (va, vb) = (a.val & !a.cst, b.val & !b.cst);
    let (ca, cb) = (a.val & a.cst, b.val & b.cst);
    out.bits(!a.cst & !b.cst, va ^ vb);
    Word {
        // xor with a constant keeps the other side's variable, negated by a true constant.
        val: va ^ vb ^ ((ca ^ cb) & a.cst & b.cst),
        neg: a.neg ^ b.neg ^ (ca & !b.cst) ^ (cb & !a.cst),
        cst: a.cst & b.cst,
    }
}

fn ch(out: &mut Out, a: Word, b: Word, c: Word) -> Word {
    if (a.cst | b.cst | c.cst) == 0 {
        let (a, b, c) = (a.value(), b.value(), c.value());
        let v = (a & b) ^ (!a & c);
        out.bits(u32::MAX, v);
        return Word::mixed(v, 0);
    }
    word_of((0..32).map(|i| Bit::ch(out, Bit::of(a, i), Bit::of(b, i), Bit::of(c, i))))
}

fn maj(out: &mut Out, a: Word, b: Word, c: Word) -> Word {
    if (a.cst | b.cst | c.cst) == 0 {
        let (a, b, c) = (a.value(), b.value(), c.value());
        let v = (a & b) ^ (a & c) ^ (b & c);
        for i in 0..32 {
            out.bit((v >> i) & 1 == 1);
            out.bit(((b & c) >> i) & 1 == 1);
        }
        return Word::mixed(v, 0);
    }
    word_of((0..32).map(|i| Bit::maj(out, Bit::of(a, i), Bit::of(b, i), Bit::of(c, i))))
}

/// `UInt32::addmany`: all-constant operands fold; otherwise every bit of the full sum is
/// allocated, carries included (enough bits for `n * (2^32 - 1)`).
fn addmany(out: &mut Out, ops: &[Word]) -> Word {
    let sum: u64 = ops.iter().map(|w| u64::from(w.value())).sum();
    if ops.iter().all(|w| w.cst == u32::MAX) {
        return Word::constant(sum as u32);
    }
    let max = ops.len() as u64 * u64::from(u32::MAX);
    let n = 64 - max.leading_zeros();
    out.bits(u32::MAX, sum as u32);
    #[cfg(test)]
    let sum = if std::mem::take(&mut out.flip_carry) {
        sum ^ (1 << 32)
    } else {
        sum
    };
    for i in 32..n {
        out.bit((sum >> i) & 1 == 1);
    }
    Word::mixed(sum as u32, 0)
}

/// The gadget's lazily summed `a` and `e`: the sum is allocated when first read.
enum Pending {
    Done(Word),
    Sum([Word; 8], usize),
}

impl Pending {
    fn sum(parts: &[Word]) -> Self {
        let mut ops = [Word::constant(0); 8];
        ops[..parts.len()].copy_from_slice(parts);
        Pending::Sum(ops, parts.len())
    }

    fn get(&self, out: &mut Out, extra: Option<Word>) -> Word {
        match *self {
            Pending::Done(w) => w,
            Pending::Sum(mut ops, n) => match extra {
                Some(x) => {
                    ops[n] = x;
                    addmany(out, &ops[..=n])
                }
                None => addmany(out, &ops[..n]),
            },
        }
    }
}

/// `w rotr r1 xor w rotr r2 xor last`, in the gadget's order.
fn sigma(out: &mut Out, w: Word, r1: u32, r2: u32, last: Word) -> Word {
    let s = xor(out, w.rotr(r1), w.rotr(r2));
    xor(out, s, last)
}

/// `sha256_compression_function`.
fn compress(out: &mut Out, block: &[Word], cur: &[Word; 8]) -> [Word; 8] {
    let mut w = [Word::constant(0); 64];
    w[..16].copy_from_slice(block);
    for i in 16..64 {
        let s0 = sigma(out, w[i - 15], 7, 18, w[i - 15].shr(3));
        let s1 = sigma(out, w[i - 2], 17, 19, w[i - 2].shr(10));
        w[i] = addmany(out, &[w[i - 16], s0, w[i - 7], s1]);
    }
    let mut a = Pending::Done(cur[0]);
    let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *cur;
    let mut e = Pending::Done(cur[4]);
    for i in 0..64 {
        let new_e = e.get(out, None);
        let s1 = sigma(out, new_e, 6, 11, new_e.rotr(25));
        let ch = ch(out, new_e, f, g);
        let temp1 = [h, s1, ch, Word::constant(ROUND_CONSTANTS[i]), w[i]];
        let new_a = a.get(out, None);
        let s0 = sigma(out, new_a, 2, 13, new_a.rotr(22));
        let maj = maj(out, new_a, b, c);
        h = g;
        g = f;
        f = new_e;
        e = Pending::sum(&[temp1[0], temp1[1], temp1[2], temp1[3], temp1[4], d]);
        d = c;
        c = b;
        b = new_a;
        a = Pending::sum(&[temp1[0], temp1[1], temp1[2], temp1[3], temp1[4], s0, maj]);
    }
    let h0 = a.get(out, Some(cur[0]));
    let h1 = addmany(out, &[cur[1], b]);
    let h2 = addmany(out, &[cur[2], c]);
    let h3 = addmany(out, &[cur[3], d]);
    let h4 = e.get(out, Some(cur[4]));
    let h5 = addmany(out, &[cur[5], f]);
    let h6 = addmany(out, &[cur[6], g]);
    let h7 = addmany(out, &[cur[7], h]);
    [h0, h1, h2, h3, h4, h5, h6, h7]
}

/// `gadgets::sha256::sha256` of a message of whole words (every use here is), padded with
/// constants; returns the digest words.
pub(crate) fn sha256(out: &mut Out, msg: &[Word]) -> [Word; 8] {
    let bits = 32 * msg.len() as u64;
    let mut padded = msg.to_vec();
    padded.push(Word::constant(0x8000_0000));
    while !(padded.len() + 2).is_multiple_of(16) {
        padded.push(Word::constant(0));
    }
    padded.push(Word::constant((bits >> 32) as u32));
    padded.push(Word::constant(bits as u32));
    let mut cur = IV.map(Word::constant);
    for block in padded.chunks_exact(16) {
        cur = compress(out, block, &cur);
    }
    cur
}

/// The digest's bytes, in order.
pub(crate) fn digest_bytes(digest: &[Word; 8]) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (chunk, w) in bytes.chunks_exact_mut(4).zip(digest) {
        chunk.copy_from_slice(&w.value().to_be_bytes());
    }
    bytes
}

/// The message words of a field element as the circuits feed one to SHA-256: its 255 allocated
/// bits (`to_bits_le`) padded with a constant zero and reordered byte-wise
/// (`reverse_bit_numbering`), i.e. its repr bytes in order with the top bit constant.
pub(crate) fn field_words(repr: &[u8; 32]) -> [Word; 8] {
    let mut words = [Word::constant(0); 8];
    for (w, chunk) in words.iter_mut().zip(repr.chunks_exact(4)) {
        let v = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        *w = Word::mixed(v, 0);
    }
    // Byte 31's top bit is bit 7 of the last word.
    words[7] = Word::mixed(words[7].value() & !0x80, 0x80);
    words
}
