use std::time::Instant;
use blstrs::Scalar;
use cuzk_common::codec;
use ff::Field;
use rand::{rngs::StdRng, Rng, SeedableRng};
fn main() {
    let n = 1usize << 20;
    let mut rng = StdRng::seed_from_u64(1);
    for (name, v) in [
        ("bits", (0..n).map(|_| Scalar::from(rng.gen::<bool>() as u64)).collect::<Vec<_>>()),
        ("full", (0..n).map(|_| Scalar::random(&mut rng)).collect::<Vec<_>>()),
    ] {
        let t = Instant::now();
        let mut out = vec![Scalar::ZERO; n];
        let t_alloc = t.elapsed();
        let mut raw = Vec::new();
        let t = Instant::now();
        codec::encode_into(&v, &mut raw);
        let t_enc = t.elapsed();
        let t = Instant::now();
        let f = codec::compress(&raw, 1);
        let t_comp = t.elapsed();
        let t = Instant::now();
        let raw2 = codec::decompress_exact(&f, raw.len()).unwrap();
        let t_dec = t.elapsed();
        let t = Instant::now();
        codec::decode_into(&raw2, &mut out).unwrap();
        let t_decode = t.elapsed();
        let t = Instant::now();
        codec::decode_into(&raw2, &mut out).unwrap();
        let t_decode2 = t.elapsed();
        println!("{name}: alloc {t_alloc:?} encode {t_enc:?} compress {t_comp:?} decompress {t_dec:?} decode {t_decode:?} decode(warm) {t_decode2:?}");
    }
}
