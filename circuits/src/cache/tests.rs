use super::*;
use crate::MimcFamily;
use cuzk_wire::witness::Witness;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts matrix captures of the wrapped family; with `file`, the family is proved with
/// its own parameter file, like PoRep.
struct Counting {
    inner: MimcFamily,
    captured: AtomicUsize,
    file: Option<PathBuf>,
    digest: Option<&'static str>,
}

impl CircuitFamily for Counting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn shape_key(&self) -> String {
        self.inner.shape_key()
    }
    fn partitions(&self) -> usize {
        self.inner.partitions()
    }
    fn partition_shape(&self) -> crate::PartitionShape {
        self.inner.partition_shape()
    }
    fn synthesize(
        &self,
        input: &[u8],
        index: usize,
        mode: crate::Synthesis,
    ) -> Result<crate::Synthesized, CircuitError> {
        self.inner.synthesize(input, index, mode)
    }
    fn capture_matrices(&self) -> Result<ShapeMatrices, CircuitError> {
        self.captured.fetch_add(1, Ordering::SeqCst);
        self.inner.capture_matrices()
    }
    fn public_inputs(
        &self,
        input: &[u8],
        index: usize,
    ) -> Result<Vec<blstrs::Scalar>, CircuitError> {
        self.inner.public_inputs(input, index)
    }
    fn parameter_file(&self) -> Option<PathBuf> {
        self.file.clone()
    }
    fn published_digest(&self) -> Option<&'static str> {
        self.digest
    }
}

fn counting(rounds: usize, file: Option<PathBuf>) -> Counting {
    Counting {
        inner: MimcFamily::new(rounds, 1).unwrap(),
        captured: AtomicUsize::new(0),
        file,
        digest: None,
    }
}

#[test]
fn concurrent_callers_build_once_and_keys_prove() {
    let dir = tempfile::tempdir().unwrap();
    let family = counting(64, None);
    // Separate caches stand in for separate processes: only the files and locks are shared.
    let (k1, k2) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            ShapeCache::new(dir.path(), true, 1 << 30)
                .proving_key(&family)
                .unwrap()
        });
        let b = s.spawn(|| {
            ShapeCache::new(dir.path(), true, 1 << 30)
                .proving_key(&family)
                .unwrap()
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(family.captured.load(Ordering::SeqCst), 1);
    let params = |k: &ProvingKey| k.srs.parameters().unwrap();
    assert!(*params(&k1) == *params(&k2));
    let e = ShapeCache::new(dir.path(), false, 1 << 30)
        .proving_key(&family)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--allow-test-params"), "{e}");
    let cache = ShapeCache::new(dir.path(), true, 1 << 30);
    let k3 = cache.proving_key(&family).unwrap();
    assert!(
        *params(&k3) == *params(&k1),
        "deterministic from the same files"
    );
    assert!(Arc::ptr_eq(&k3, &cache.proving_key(&family).unwrap()));
    assert_eq!(family.captured.load(Ordering::SeqCst), 1);
    let id = cache.shape_id(&family).unwrap();
    assert_eq!(id.hash, k3.matrices.hash());
    assert!(cache
        .test_params_path("mimc-r64", &k3.matrices)
        .to_str()
        .unwrap()
        .contains("TEST-ONLY-INSECURE-mimc-r64-"));

    // A deterministic derivation: a fresh directory yields the same parameters.
    let dir2 = tempfile::tempdir().unwrap();
    let again = ShapeCache::new(dir2.path(), true, 1 << 30)
        .proving_key(&family)
        .unwrap();
    assert!(*params(&again) == *params(&k1));

    // The key proves a witness that verifies.
    let key = cuzk_prover::CpuBackend;
    let loaded = cuzk_prover::Backend::load_key(&key, k3.clone()).unwrap();
    let w: Witness = family.witness(b"x", 0, None).unwrap();
    let proof = cuzk_prover::prove(
        &key,
        &loaded,
        &w,
        blstrs::Scalar::from(3u64),
        blstrs::Scalar::from(4u64),
    )
    .unwrap();
    let pvk = bellperson::groth16::prepare_verifying_key(&k3.info.vk);
    assert!(cuzk_prover::verify(&pvk, &proof, &family.public_inputs(b"x", 0).unwrap()).unwrap());
}

#[test]
fn corrupt_matrices_are_rebuilt_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let family = counting(32, None);
    let cache = ShapeCache::new(dir.path(), true, 0);
    let m = cache.matrices(&family).unwrap();
    let path = cache.matrices_path("mimc-r32", &m.hash());
    let good = fs::read(&path).unwrap();
    for damage in [good.len() / 2, good.len() - 3] {
        let mut bad = good.clone();
        bad.truncate(damage);
        fs::write(&path, &bad).unwrap();
        let fresh = ShapeCache::new(dir.path(), true, 0);
        assert_eq!(*fresh.matrices(&family).unwrap(), *m);
        assert_eq!(fs::read(&path).unwrap(), good, "rebuilt in place");
    }
    let mut flipped = good.clone();
    flipped[100] ^= 1;
    fs::write(&path, &flipped).unwrap();
    assert_eq!(
        *ShapeCache::new(dir.path(), true, 0)
            .matrices(&family)
            .unwrap(),
        *m
    );
    assert_eq!(family.captured.load(Ordering::SeqCst), 4);
}

#[test]
fn test_params_need_the_allow_flag_and_family_files_are_never_generated() {
    let dir = tempfile::tempdir().unwrap();
    let e = ShapeCache::new(dir.path(), false, 0)
        .proving_key(&counting(16, None))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--allow-test-params"), "{e}");

    let file = dir.path().join("ceremony.params");
    let family = counting(32, Some(file.clone()));
    let cache = ShapeCache::new(dir.path().join("cache"), true, 1 << 30);
    let e = cache.proving_key(&family).err().unwrap().to_string();
    assert!(e.contains("no Groth16 parameters for mimc-r32 at"), "{e}");
    assert!(e.contains("ceremony.params"), "{e}");
    // The family's own file is used once it exists; a file for another shape is refused.
    let other = ShapeCache::new(dir.path().join("other"), true, 0)
        .proving_key(&counting(33, None))
        .unwrap();
    fs::copy(
        ShapeCache::new(dir.path().join("other"), true, 0)
            .test_params_path("mimc-r33", &other.matrices),
        &file,
    )
    .unwrap();
    let e = cache.proving_key(&family).err().unwrap().to_string();
    assert!(e.contains("the parameters do not fit the circuit"), "{e}");
    let own = ShapeCache::new(dir.path().join("own"), true, 0)
        .proving_key(&counting(32, None))
        .unwrap();
    fs::copy(
        ShapeCache::new(dir.path().join("own"), true, 0)
            .test_params_path("mimc-r32", &own.matrices),
        &file,
    )
    .unwrap();
    let k = cache.proving_key(&family).unwrap();
    let params = |k: &ProvingKey| k.srs.parameters().unwrap();
    assert!(*params(&k) == *params(&own));
    assert!(!cache.test_params_path("mimc-r32", &own.matrices).exists());

    // A published file, named relative to the directory, is checked against its digest
    // before it is read.
    let published = |digest| Counting {
        digest: Some(digest),
        ..counting(32, Some(PathBuf::from("ceremony.params")))
    };
    let good: &'static str = Box::leak(crate::param_files::digest(&file).unwrap().into_boxed_str());
    let k = ShapeCache::new(dir.path(), false, 0)
        .proving_key(&published(good))
        .unwrap();
    assert!(*params(&k) == *params(&own));
    let e = ShapeCache::new(dir.path(), false, 0)
        .proving_key(&published("00000000000000000000000000000000"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("ceremony.params is corrupt or not the published one"),
        "{e}"
    );
    std::fs::write(&file, b"truncated").unwrap();
    let e = ShapeCache::new(dir.path().join("cache"), true, 0)
        .proving_key(&family)
        .err()
        .unwrap();
    assert!(e.to_string().contains("corrupt or truncated"), "{e}");
}

#[test]
fn marked_parameter_files_need_the_allow_flag() {
    let dir = tempfile::tempdir().unwrap();
    let generated = ShapeCache::new(dir.path().join("gen"), true, 0)
        .proving_key(&counting(16, None))
        .unwrap();
    let file = dir.path().join("v28-marked.params");
    fs::copy(
        ShapeCache::new(dir.path().join("gen"), true, 0)
            .test_params_path("mimc-r16", &generated.matrices),
        &file,
    )
    .unwrap();
    crate::param_files::mark_insecure(&file).unwrap();
    // Under a published name with a digest it cannot match, as PoSt's and SnapDeals' are.
    let family = Counting {
        digest: Some("00000000000000000000000000000000"),
        ..counting(16, Some(PathBuf::from("v28-marked.params")))
    };
    let e = ShapeCache::new(dir.path(), false, 0)
        .proving_key(&family)
        .err()
        .unwrap();
    assert!(matches!(e, CircuitError::Params { .. }), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("v28-marked.params is marked INSECURE"), "{e}");
    assert!(e.contains("--allow-test-params"), "{e}");
    // An operator's marked file is refused the same way.
    let operator = ShapeCache::new(dir.path().join("op"), false, 0)
        .with_parameter_files([("mimc-r16".to_string(), file.clone())].into());
    let e = operator
        .proving_key(&counting(16, None))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("v28-marked.params is marked INSECURE"), "{e}");
    // Allowed, the marked file is used (without the digest check).
    ShapeCache::new(dir.path(), true, 0)
        .proving_key(&family)
        .unwrap();

    // A missing file names where the family's parameters come from.
    let e = ShapeCache::new(dir.path(), false, 0)
        .proving_key(&counting(16, Some(PathBuf::from("v28-absent.params"))))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("lotus fetch-params"), "{e}");
    assert!(!e.contains("cuzk-porep"), "{e}");
}

#[test]
fn host_keys_are_evicted_least_recently_used_first() {
    let dir = tempfile::tempdir().unwrap();
    let (f1, f2, f3) = (counting(8, None), counting(9, None), counting(10, None));
    let probe = ShapeCache::new(dir.path(), true, u64::MAX);
    let size = host_bytes(&probe.proving_key(&f1).unwrap());
    // Room for two keys of about this size.
    let cache = ShapeCache::new(dir.path(), true, 2 * size + size / 2);
    let k1 = cache.proving_key(&f1).unwrap();
    let k2 = cache.proving_key(&f2).unwrap();
    assert!(Arc::ptr_eq(&k1, &cache.proving_key(&f1).unwrap()));
    cache.proving_key(&f3).unwrap(); // evicts f2, the least recently used
    assert!(Arc::ptr_eq(&k1, &cache.proving_key(&f1).unwrap()));
    assert!(!Arc::ptr_eq(&k2, &cache.proving_key(&f2).unwrap()));
}
