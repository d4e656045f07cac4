//! Any bytes from the object store: the decoder, and the expansion of what it keeps compact,
//! must return an error, never panic or allocate past their limits.
#![no_main]

use cuzk_wire::blob::{decode_blob, peek_header, DecodeLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Small limits so a forged header cannot make the fuzzer itself run out of memory.
    let limits = DecodeLimits { max_blob_bytes: 1 << 20, max_elements_per_vector: 1 << 16, max_decoded_bytes: 16 << 20 };
    let _ = peek_header(data, &limits);
    if let Ok((header, witness)) = decode_blob(data, &limits) {
        assert_eq!((witness.input.len() as u64, witness.aux.len() as u64), (header.inputs, header.aux));
    }
});
