//! `cuzk-porep params` makes test parameters for every circuit family, under the file names
//! filecoin-proofs looks for, marked insecure.

use std::path::Path;
use std::process::Command;

use cuzk_circuits::porep::SectorSize;
use cuzk_circuits::post::{self, PostKind, PostProof};
use cuzk_circuits::snap;

/// Runs `cuzk-porep params` for `proof` at 2 KiB into `dir`; the path it printed.
fn params(dir: &Path, proof: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk-porep"))
        .args([
            "params",
            "--sector-size",
            "2KiB",
            "--engine",
            "cpu",
            "--proof",
            proof,
        ])
        .arg("--param-cache")
        .arg(dir)
        .output()
        .expect("cuzk-porep runs");
    assert!(
        out.status.success(),
        "{proof}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn post_and_snap_deals_test_parameters_are_made_under_their_published_names() {
    let dir = tempfile::tempdir().unwrap();
    // The names filecoin-proofs derives, under the directory the command was given.
    // SAFETY: set before any thread starts; filecoin-proofs reads it on first use, after this.
    unsafe { std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir.path()) };
    let window = PostProof::current(PostKind::Window, SectorSize::S2KiB);
    let winning = PostProof::current(PostKind::Winning, SectorSize::S2KiB);
    for (proof, want) in [
        ("window-post", post::parameter_path(window).unwrap()),
        ("winning-post", post::parameter_path(winning).unwrap()),
        ("snap-deals", snap::parameter_path(SectorSize::S2KiB)),
    ] {
        let made = params(dir.path(), proof);
        assert_eq!(Path::new(&made), want, "{proof}");
        assert!(want.exists(), "{proof}: {} missing", want.display());
        for also in [".vk", ".meta"] {
            let sibling = want.with_extension(&also[1..]);
            assert!(sibling.exists(), "{proof}: {} missing", sibling.display());
        }
        let marker = format!("{}.TEST-ONLY-INSECURE", want.display());
        assert!(Path::new(&marker).exists(), "{proof}: not marked insecure");
    }
}
