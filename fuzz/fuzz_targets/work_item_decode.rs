//! Any work-item bytes from the work stream: decoded within bounds or rejected.
#![no_main]

use cuzk_wire::job::WorkItem;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(item) = WorkItem::decode(data) {
        assert!(item.partition < item.partitions);
    }
});
