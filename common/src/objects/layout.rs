//! How an object is cut into stripes and spread over buckets, and how its head object (stripe 0,
//! in the first bucket) records that for readers.

use std::collections::HashMap;

use async_nats::jetstream::object_store::ObjectInfo;

use super::{unavailable, ObjectError};

/// Objects above this size are written as several stripes (objects `NAME`, `NAME.stripe1`, …)
/// moved concurrently: the object store acknowledges chunk by chunk, so one object moves at one
/// round trip per chunk and stripes are what makes a blob move at GB/s (docs/gpu-runs.md, "32
/// GiB on one H200, 16 cores").
pub const STRIPE_BYTES: usize = 8 << 20;
/// At most this many stripes; larger objects get larger stripes.
pub const MAX_STRIPES: usize = 16;
/// At most this many buckets in a set (`Shards`), and so under one object.
pub const MAX_SHARDS: usize = 8;
const META_STRIPE_BYTES: &str = "cuzk-stripe-bytes";
const META_TOTAL_BYTES: &str = "cuzk-total-bytes";
/// How many buckets the stripes are spread over; absent (objects written before there were
/// several, inputs put by `nats object put`) means one.
const META_SHARDS: &str = "cuzk-stripe-buckets";

/// How an object of `total` bytes is cut: every stripe `stripe_bytes` long but the last, stripe
/// `i` in bucket `i % shards` of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    total: usize,
    stripe_bytes: usize,
    shards: usize,
}

impl Layout {
    /// The layout a writer with `shards` buckets (1 to `MAX_SHARDS`) gives `total` bytes. Above
    /// one stripe's worth the object gets a multiple of `shards` stripes of equal length, so each
    /// bucket holds as many bytes as the others (its byte limit is an equal share of the total,
    /// topology.rs) and its stream sends as many: an 80 MB blob is 12 stripes of 6.7 MB, where 10
    /// of 8 MiB put 30 % into two buckets and 20 % into the other two.
    pub(super) fn for_len(total: usize, shards: usize) -> Layout {
        let stripes = match total.div_ceil(STRIPE_BYTES) {
            0 | 1 => 1,
            n => n
                .next_multiple_of(shards)
                .min(MAX_STRIPES / shards * shards),
        };
        Layout {
            total,
            stripe_bytes: total.div_ceil(stripes).max(1),
            shards: if stripes > 1 { shards } else { 1 },
        }
    }

    pub(super) fn total(&self) -> usize {
        self.total
    }

    pub(super) fn stripes(&self) -> usize {
        self.total.div_ceil(self.stripe_bytes).max(1)
    }

    pub(super) fn range(&self, stripe: usize) -> std::ops::Range<usize> {
        let start = (stripe * self.stripe_bytes).min(self.total);
        start..(start + self.stripe_bytes).min(self.total)
    }

    /// Which bucket of the set holds `stripe`.
    pub(super) fn shard(&self, stripe: usize) -> usize {
        stripe % self.shards
    }

    /// The head object's description of the whole, for a reader that knows `known` buckets; an
    /// object written without stripes (by an older node, or by `nats object put`) is one stripe
    /// of its own size, in the first bucket.
    pub(super) fn from_info(info: &ObjectInfo, known: usize) -> Result<Layout, ObjectError> {
        let field = |key: &str| info.metadata.get(key).map(|v| v.parse::<usize>());
        let malformed = || unavailable(&info.name, "malformed stripe metadata");
        let layout = match (
            field(META_TOTAL_BYTES),
            field(META_STRIPE_BYTES),
            field(META_SHARDS),
        ) {
            (None, None, None) => Layout {
                total: info.size,
                stripe_bytes: info.size.max(1),
                shards: 1,
            },
            (Some(Ok(total)), Some(Ok(stripe_bytes)), shards) if stripe_bytes > 0 => Layout {
                total,
                stripe_bytes,
                shards: match shards {
                    None => 1,
                    Some(Ok(n)) if n > 0 => n,
                    Some(_) => return Err(malformed()),
                },
            },
            _ => return Err(malformed()),
        };
        if layout.stripes() > MAX_STRIPES || layout.range(0).len() != info.size {
            return Err(unavailable(
                &info.name,
                format!(
                    "stripe metadata ({} of {} bytes) does not match its {} bytes",
                    layout.total, layout.stripe_bytes, info.size
                ),
            ));
        }
        if layout.shards > known {
            return Err(ObjectError::UnknownShards {
                name: info.name.clone(),
                shards: layout.shards,
                known,
            });
        }
        Ok(layout)
    }

    pub(super) fn metadata(&self) -> HashMap<String, String> {
        if self.stripes() == 1 {
            return HashMap::new();
        }
        let mut metadata = HashMap::from([
            (META_TOTAL_BYTES.to_owned(), self.total.to_string()),
            (META_STRIPE_BYTES.to_owned(), self.stripe_bytes.to_string()),
        ]);
        // Left out for one bucket, so that such objects read as they did before shards.
        if self.shards > 1 {
            metadata.insert(META_SHARDS.to_owned(), self.shards.to_string());
        }
        metadata
    }
}

pub(super) fn stripe_name(name: &str, stripe: usize) -> String {
    match stripe {
        0 => name.to_owned(),
        i => format!("{name}.stripe{i}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(size: usize, metadata: HashMap<String, String>) -> ObjectInfo {
        ObjectInfo {
            name: "o".into(),
            description: None,
            metadata,
            headers: None,
            options: None,
            bucket: "b".into(),
            nuid: "n".into(),
            size,
            chunks: 1,
            modified: None,
            digest: None,
            deleted: false,
        }
    }

    fn meta(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn layouts_cover_every_byte_once() {
        for shards in [1, 2, 4, MAX_SHARDS] {
            for total in [
                0,
                1,
                STRIPE_BYTES - 1,
                STRIPE_BYTES,
                STRIPE_BYTES + 1,
                79_339_268,
                1 << 30,
            ] {
                let l = Layout::for_len(total, shards);
                let at = format!("{total} bytes over {shards}");
                assert!(l.stripes() <= MAX_STRIPES, "{at}");
                if l.stripes() > 1 {
                    assert_eq!(l.stripes() % shards, 0, "{at}: buckets unevenly loaded");
                }
                let mut next = 0;
                for i in 0..l.stripes() {
                    let r = l.range(i);
                    assert_eq!(r.start, next, "{at}");
                    assert!(!r.is_empty() || total == 0, "{at}: stripe {i} empty");
                    next = r.end;
                }
                assert_eq!(next, total);
                let head = info(l.range(0).len(), l.metadata());
                let read = Layout::from_info(&head, shards).unwrap();
                assert_eq!(read, l, "{at}");
            }
        }
    }

    #[test]
    fn plain_objects_are_one_stripe() {
        let l = Layout::from_info(&info(5, HashMap::new()), 4).unwrap();
        assert_eq!((l.stripes(), l.range(0), l.shard(0)), (1, 0..5, 0));
    }

    /// Objects written over one bucket (before there were shards) say nothing about buckets and
    /// are read from the first bucket alone by a reader that knows more.
    #[test]
    fn striped_objects_of_one_bucket_read_from_the_first() {
        let written = Layout::for_len(3 * STRIPE_BYTES, 1);
        assert!(!written.metadata().contains_key(META_SHARDS));
        let head = info(written.range(0).len(), written.metadata());
        let read = Layout::from_info(&head, 4).unwrap();
        assert_eq!(read.stripes(), 3);
        assert!((0..3).all(|i| read.shard(i) == 0));
    }

    #[test]
    fn lying_stripe_metadata_is_refused() {
        let stripes = [(META_TOTAL_BYTES, "100"), (META_STRIPE_BYTES, "10")];
        let bad = [
            vec![(META_TOTAL_BYTES, "100")],
            vec![(META_TOTAL_BYTES, "x"), (META_STRIPE_BYTES, "10")],
            vec![(META_TOTAL_BYTES, "100"), (META_STRIPE_BYTES, "0")],
            // 1000 stripes: over the bound.
            vec![(META_TOTAL_BYTES, "1000"), (META_STRIPE_BYTES, "1")],
            // The head is 10 bytes but claims 20-byte stripes.
            vec![(META_TOTAL_BYTES, "100"), (META_STRIPE_BYTES, "20")],
            // Buckets without stripes, and bucket counts that are no count.
            vec![(META_SHARDS, "2")],
            [&stripes[..], &[(META_SHARDS, "0")]].concat(),
            [&stripes[..], &[(META_SHARDS, "-1")]].concat(),
            [&stripes[..], &[(META_SHARDS, "99999999999999999999999")]].concat(),
        ];
        for pairs in bad {
            let meta = meta(&pairs);
            let err = Layout::from_info(&info(10, meta.clone()), MAX_SHARDS).unwrap_err();
            assert!(
                matches!(err, ObjectError::Unavailable { .. }),
                "{meta:?}: {err}"
            );
        }
    }

    #[test]
    fn more_buckets_than_the_reader_knows_are_refused() {
        let head = |n: &str| {
            info(
                10,
                meta(&[
                    (META_TOTAL_BYTES, "100"),
                    (META_STRIPE_BYTES, "10"),
                    (META_SHARDS, n),
                ]),
            )
        };
        assert!(Layout::from_info(&head("4"), 4).is_ok());
        for (claimed, known) in [(5, 4), (2, 1), (MAX_SHARDS + 1, MAX_SHARDS)] {
            let err = Layout::from_info(&head(&claimed.to_string()), known).unwrap_err();
            assert!(
                matches!(err, ObjectError::UnknownShards { shards, known: k, .. }
                    if shards == claimed && k == known),
                "{claimed} over {known}: {err}"
            );
        }
    }
}
