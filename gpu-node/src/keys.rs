//! Proving keys loaded into one backend (one GPU, or the CPU engine), shared by every worker on
//! it and bounded in bytes: loading a shape evicts the least recently used others until it fits.
//! A key still in use by a worker is freed when that worker lets go of it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use bellperson::groth16::PreparedVerifyingKey;
use blstrs::Bls12;
use cuzk_prover::Backend;
use tokio::sync::Mutex;
use tracing::info;

/// A shape's key in a backend's form.
pub struct Loaded<B: Backend> {
    pub key: B::Key,
    pub pvk: PreparedVerifyingKey<Bls12>,
    /// What the key holds in the backend's memory.
    pub bytes: u64,
}

struct Entry<B: Backend> {
    loaded: Arc<Loaded<B>>,
    used: u64,
}

pub struct Keys<B: Backend> {
    budget: u64,
    /// Locked while a key loads, so two workers never load the same shape twice.
    entries: Mutex<(u64, HashMap<String, Entry<B>>)>,
}

impl<B: Backend> Keys<B> {
    pub fn new(budget: u64) -> Self {
        Keys {
            budget,
            entries: Mutex::new((0, HashMap::new())),
        }
    }

    /// The shape's loaded key. When it is not resident, `prepare` gets what loading needs and
    /// the bytes the key will take, room is made, and `load` loads it.
    pub async fn get_or_load<T, E, P, L>(
        &self,
        shape: &str,
        prepare: P,
        load: impl FnOnce(T) -> L,
    ) -> Result<Arc<Loaded<B>>, E>
    where
        P: Future<Output = Result<(T, u64), E>>,
        L: Future<Output = Result<Loaded<B>, E>>,
    {
        let mut guard = self.entries.lock().await;
        let (clock, map) = &mut *guard;
        *clock += 1;
        if let Some(e) = map.get_mut(shape) {
            e.used = *clock;
            return Ok(e.loaded.clone());
        }
        let (prepared, need) = prepare.await?;
        while !map.is_empty()
            && map.values().map(|e| e.loaded.bytes).sum::<u64>() + need > self.budget
        {
            let oldest = map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
                .expect("not empty");
            info!(shape = %oldest, "evicting a proving key to make room");
            map.remove(&oldest);
        }
        let loaded = Arc::new(load(prepared).await?);
        map.insert(
            shape.to_string(),
            Entry {
                loaded: loaded.clone(),
                used: *clock,
            },
        );
        Ok(loaded)
    }

    pub async fn contains(&self, shape: &str) -> bool {
        self.entries.lock().await.1.contains_key(shape)
    }

    /// Drops the shape's key; returns the bytes it held, if it was resident. A worker proving
    /// with it keeps it until it lets go.
    pub async fn evict(&self, shape: &str) -> Option<u64> {
        let removed = self.entries.lock().await.1.remove(shape);
        removed.map(|e| e.loaded.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::groth16::prepare_verifying_key;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn loaded(bytes: u64) -> Loaded<cuzk_prover::CpuBackend> {
        let key = dummy_key();
        Loaded {
            pvk: prepare_verifying_key(&key.info.vk),
            key: cuzk_prover::Backend::load_key(&cuzk_prover::CpuBackend, key).unwrap(),
            bytes,
        }
    }

    fn dummy_key() -> Arc<cuzk_prover::ProvingKey> {
        use cuzk_prover::r1cs::{Matrix, ShapeMatrices};
        let row = Matrix {
            row_ptr: vec![0, 1],
            cols: vec![0],
            coeffs: vec![0],
        };
        let empty = Matrix {
            row_ptr: vec![0, 0],
            cols: vec![],
            coeffs: vec![],
        };
        let m = ShapeMatrices::new(
            1,
            0,
            vec![blstrs::Scalar::from(1u64), -blstrs::Scalar::from(1u64)],
            row,
            empty.clone(),
            empty,
        )
        .unwrap();
        let g1 = group::prime::PrimeCurveAffine::generator();
        let g2 = group::prime::PrimeCurveAffine::generator();
        let params = bellperson::groth16::Parameters::<Bls12> {
            vk: bellperson::groth16::VerifyingKey {
                alpha_g1: g1,
                beta_g1: g1,
                beta_g2: g2,
                gamma_g2: g2,
                delta_g1: g1,
                delta_g2: g2,
                ic: vec![g1],
            },
            h: Arc::new(vec![]),
            l: Arc::new(vec![]),
            a: Arc::new(vec![g1]),
            b_g1: Arc::new(vec![]),
            b_g2: Arc::new(vec![]),
        };
        Arc::new(cuzk_prover::ProvingKey::new(Arc::new(params), Arc::new(m)).unwrap())
    }

    #[tokio::test]
    async fn loads_once_and_evicts_least_recently_used() {
        let keys: Keys<cuzk_prover::CpuBackend> = Keys::new(25);
        let loads = AtomicUsize::new(0);
        let get = |shape: &'static str| {
            let loads = &loads;
            let keys = &keys;
            async move {
                keys.get_or_load(shape, async { Ok::<_, ()>(((), 10)) }, |()| async {
                    loads.fetch_add(1, Ordering::SeqCst);
                    Ok(loaded(10))
                })
                .await
                .unwrap()
            }
        };
        let a = get("a").await;
        assert!(Arc::ptr_eq(&a, &get("a").await));
        get("b").await;
        get("a").await; // b is now the least recently used
        get("c").await; // 30 > 25: evicts b
        assert_eq!(loads.load(Ordering::SeqCst), 3);
        assert!(Arc::ptr_eq(&a, &get("a").await));
        get("b").await;
        assert_eq!(
            loads.load(Ordering::SeqCst),
            4,
            "b was evicted and reloaded"
        );
        // A failed load leaves nothing behind.
        let err = keys
            .get_or_load(
                "d",
                async { Err::<((), u64), _>("no parameters") },
                |()| async { Ok(loaded(1)) },
            )
            .await;
        assert!(err.is_err());
        assert_eq!(loads.load(Ordering::SeqCst), 4);
        assert_eq!(keys.evict("a").await, Some(10));
        assert!(!keys.contains("a").await && keys.evict("a").await.is_none());
    }
}
