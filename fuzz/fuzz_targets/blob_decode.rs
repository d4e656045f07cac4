//! Any bytes from the object store: the decoder must return an error, never panic or allocate
//! past its limits.
#![no_main]

use cuzk_wire::blob::{decode_blob, peek_header, DecodeLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Small limits so a forged header cannot make the fuzzer itself run out of memory.
    let limits = DecodeLimits { max_blob_bytes: 1 << 20, max_elements_per_vector: 1 << 16, max_decoded_bytes: 16 << 20 };
    let _ = peek_header(data, &limits);
    if let Ok((_, assignment)) = decode_blob(data, &limits) {
        assert!(assignment.check_shape().is_ok());
    }
});
