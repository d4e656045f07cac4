//! `cuzk-load blobs`: witness-blob transfer through the cluster's blob buckets, one object per
//! blob in the head bucket (the object store's own put and get, what nodes did before striping)
//! beside cuzk's striped objects (common/src/objects) spread over each of `--buckets` bucket
//! counts (nodes use all [`BLOB_SHARDS`]) and written and read through each of `--connections`
//! connection counts (nodes open [`cuzk_cli::BLOB_CONNECTIONS`]): same server, same
//! incompressible bytes, one table.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::jetstream::object_store::{self, ObjectMetadata};
use async_nats::jetstream::stream::StorageType;
use async_nats::jetstream::Context;
use bytes::Bytes;
use clap::Args;
use cuzk_common::local_nats::NatsServer;
use cuzk_common::objects::{self, Shards, BLOB_CHUNK_SIZE};
use cuzk_common::topology::{blob_shard_bucket, jetstream_context, provision, Limits, BLOB_SHARDS};
use futures::{StreamExt, TryStreamExt};
use rand::RngCore;
use tokio::io::AsyncReadExt;

#[derive(Args)]
pub struct BlobArgs {
    /// NATS server URL; default: a nats-server this command starts on loopback.
    #[arg(long = "nats-url", env = "CUZK_NATS_URL")]
    url: Option<String>,
    /// Size of each blob in MB (a 32 GiB PoRep partition's witness blob is ~80 MB).
    #[arg(long, default_value_t = 80)]
    mb: usize,
    /// Blobs moved per layout.
    #[arg(long, default_value_t = 8)]
    count: usize,
    /// Blobs moving at once (a synth node uploads several partitions at a time).
    #[arg(long, default_value_t = 1)]
    in_flight: usize,
    /// Connection counts to write and read striped blobs through, one row each (per bucket
    /// count).
    #[arg(long, value_delimiter = ',', default_values_t = [1, cuzk_cli::BLOB_CONNECTIONS])]
    connections: Vec<usize>,
    /// Counts of blob buckets to stripe over (the head and the next ones), one row each (per
    /// connection count).
    #[arg(long, value_delimiter = ',', default_values_t = [1, BLOB_SHARDS])]
    buckets: Vec<usize>,
    /// Where the server keeps this run's blob buckets: on disk, as nodes' are made, or in
    /// memory (`memory`), to see what the file store costs.
    #[arg(long, default_value = "file", value_parser = ["file", "memory"])]
    storage: String,
}

#[derive(Clone, Copy)]
enum Layout {
    OneObject,
    Striped { buckets: usize, connections: usize },
}

impl Layout {
    fn name(self) -> String {
        match self {
            Layout::OneObject => "one object per blob".into(),
            Layout::Striped {
                buckets,
                connections,
            } => {
                let node = buckets == BLOB_SHARDS && connections == cuzk_cli::BLOB_CONNECTIONS;
                format!(
                    "striped over {buckets} bucket(s), through {connections} connection(s){}",
                    if node { " (nodes)" } else { "" }
                )
            }
        }
    }

    /// The first of the cluster's blob buckets, as many as this layout writes to, as opened on
    /// each connection it uses (`all`: the buckets on every connection the run opened).
    fn buckets(self, all: &[Shards]) -> anyhow::Result<Vec<Shards>> {
        let (n, connections) = match self {
            Layout::OneObject => (1, 1),
            Layout::Striped {
                buckets,
                connections,
            } => (buckets, connections),
        };
        let first = |shards: &Shards| Shards::new(shards.iter().take(n).cloned().collect());
        let sets: Option<Vec<Shards>> = all.iter().take(connections).map(first).collect();
        sets.context("no such bucket count")
    }

    async fn put(self, writers: &[Shards], name: &str, bytes: &Bytes) -> anyhow::Result<()> {
        match self {
            Layout::OneObject => {
                let meta = ObjectMetadata {
                    name: name.to_owned(),
                    chunk_size: Some(BLOB_CHUNK_SIZE),
                    ..Default::default()
                };
                writers[0].head().put(meta, &mut &bytes[..]).await?;
            }
            Layout::Striped { .. } => objects::put_through(writers, name, bytes.clone()).await?,
        }
        Ok(())
    }

    /// Reads `name` into `out`, a buffer used before, as the GPU node's are
    /// (gpu-node/src/buffers.rs): what is timed is the transfer, not the page faults of memory
    /// never touched (docs/gpu-runs.md, "H with six transforms; blobs read into reused buffers").
    async fn get(
        self,
        (shards, readers): (&Shards, &[Context]),
        (name, len): (&str, usize),
        out: &mut Vec<u8>,
    ) -> anyhow::Result<()> {
        match self {
            Layout::OneObject => {
                out.clear();
                shards.head().get(name).await?.read_to_end(out).await?;
            }
            Layout::Striped { connections, .. } => {
                let readers = &readers[..connections];
                objects::read_bounded_into(shards, readers, name, len as u64, out).await?;
            }
        }
        anyhow::ensure!(
            out.len() == len,
            "{name}: read {} of {len} bytes",
            out.len()
        );
        Ok(())
    }
}

/// Runs `op` on every blob index, `in_flight` at a time; returns the wall seconds.
async fn timed<F, Fut>(count: usize, in_flight: usize, op: F) -> anyhow::Result<f64>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    futures::stream::iter((0..count).map(op))
        .buffer_unordered(in_flight.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(started.elapsed().as_secs_f64())
}

pub async fn run(args: BlobArgs) -> anyhow::Result<()> {
    let server = match args.url {
        Some(_) => None,
        None => Some(NatsServer::start().context("starting nats-server")?),
    };
    let url = args
        .url
        .clone()
        .unwrap_or_else(|| server.as_ref().map(NatsServer::url).unwrap_or_default());
    let client = async_nats::connect(&url).await?;
    let len = args.mb * 1_000_000;
    // Buckets for this run's blobs (one layout's at a time), not the production 16 GiB that
    // nats-server would have to reserve on the disk. Each bucket gets an equal share of the
    // total, and the one-bucket layouts put all of a layout's blobs into the head bucket.
    let limits = Limits {
        blobs_max_bytes: (BLOB_SHARDS * 2 * len * args.count).max(1 << 30) as i64,
        ..Limits::local()
    };
    let js = jetstream_context(client, Duration::from_secs(30));
    if args.storage == "memory" {
        // Made first, so that provisioning finds them and leaves them as they are.
        for k in 0..BLOB_SHARDS {
            js.create_object_store(object_store::Config {
                bucket: blob_shard_bucket(k),
                max_bytes: limits.blobs_max_bytes / BLOB_SHARDS as i64,
                storage: StorageType::Memory,
                ..Default::default()
            })
            .await?;
        }
    }
    let mut topology = provision(&js, 1, Duration::from_secs(60), limits).await?;
    let connections = args.connections.iter().copied().max().unwrap_or(1);
    anyhow::ensure!(
        (1..=64).contains(&connections) && !args.connections.contains(&0),
        "--connections: counts from 1 to 64"
    );
    anyhow::ensure!(
        args.buckets.iter().all(|b| (1..=BLOB_SHARDS).contains(b)),
        "--buckets: counts from 1 to {BLOB_SHARDS}"
    );
    for _ in 1..connections {
        let client = async_nats::connect(&url).await?;
        let js = jetstream_context(client, Duration::from_secs(30));
        topology.add_blob_connection(js).await?;
    }
    let readers = &topology.blob_readers[..];
    let blobs: Vec<Bytes> = (0..args.count)
        .map(|_| {
            let mut bytes = vec![0u8; len];
            rand::thread_rng().fill_bytes(&mut bytes);
            bytes.into()
        })
        .collect();
    // One read buffer per blob in flight, written once so that its pages are mapped.
    let buffers = &std::sync::Mutex::new(vec![vec![1u8; len]; args.in_flight.max(1)]);
    let tag = rand::random::<u32>();
    let total_mb = (len * args.count) as f64 / 1e6;
    println!(
        "{} blobs of {} MB, {} in flight, {} storage, {url}",
        args.count, args.mb, args.in_flight, args.storage
    );
    println!("| layout | upload MB/s | fetch MB/s |\n|---|---|---|");
    let mut rates = Vec::new();
    let striped = args.buckets.iter().flat_map(|&buckets| {
        let connections = args.connections.iter();
        connections.map(move |&connections| Layout::Striped {
            buckets,
            connections,
        })
    });
    let layouts: Vec<Layout> = std::iter::once(Layout::OneObject).chain(striped).collect();
    for (l, &layout) in layouts.iter().enumerate() {
        let writers = &layout.buckets(&topology.blob_writers)?;
        let shards = &writers[0];
        let name = |i: usize| format!("blob-bench-{tag}-{l}-{i}");
        let up = timed(args.count, args.in_flight, |i| {
            let (name, bytes) = (name(i), &blobs[i]);
            async move { layout.put(writers, &name, bytes).await }
        })
        .await?;
        let down = timed(args.count, args.in_flight, |i| {
            let name = name(i);
            async move {
                let mut out = buffers.lock().unwrap().pop().unwrap_or_default();
                let read = layout.get((shards, readers), (&name, len), &mut out).await;
                buffers.lock().unwrap().push(out);
                read
            }
        })
        .await?;
        for i in 0..args.count {
            objects::delete(shards, &name(i)).await?;
        }
        let rate = (total_mb / up, total_mb / down);
        println!("| {} | {:.0} | {:.0} |", layout.name(), rate.0, rate.1);
        rates.push(rate);
    }
    for (layout, rate) in layouts.iter().zip(&rates).skip(1) {
        println!(
            "| ratio {} / one object | {:.2} | {:.2} |",
            layout.name(),
            rate.0 / rates[0].0,
            rate.1 / rates[0].1
        );
    }
    Ok(())
}
