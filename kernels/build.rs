//! Compiles kernels/cuda/cuzk.cu into a fatbin (SASS for sm_80/86/89/90 + compute_90 PTX) and
//! exposes it to the crate behind `cfg(cuzk_fatbin)`. Without nvcc the crate still builds
//! (CPU-only) and says so with a cargo warning.
//!
//! nvcc is looked up in this order: `$NVCC`; the install script's prefix
//! (`$CUZK_NVCC_PREFIX`, default `$HOME/.cache/cuzk/nvcc`) + `nvidia/cu13/bin/nvcc`; `PATH`.
//! `CUZK_CUDA_ARCHS` (e.g. "90") narrows the SASS list for quicker local builds;
//! `CUZK_NVCC_FLAGS` adds flags (`-lineinfo`, `-D` kernel tuning variants).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn find_nvcc() -> Option<PathBuf> {
    if let Some(p) = env::var_os("NVCC") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
        println!(
            "cargo:warning=NVCC={} does not exist; looking elsewhere",
            p.display()
        );
    }
    let prefix = env::var_os("CUZK_NVCC_PREFIX")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cache/cuzk/nvcc")));
    if let Some(prefix) = prefix {
        let p = prefix.join("nvidia/cu13/bin/nvcc");
        if p.is_file() {
            return Some(p);
        }
    }
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|d| d.join("nvcc"))
        .find(|p| p.is_file())
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cuzk_fatbin)");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUZK_NVCC_PREFIX");
    println!("cargo:rerun-if-env-changed=CUZK_CUDA_ARCHS");
    println!("cargo:rerun-if-env-changed=CUZK_NVCC_FLAGS");
    println!("cargo:rerun-if-env-changed=PATH");
    let cuda_dir = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("cuda");
    for entry in std::fs::read_dir(&cuda_dir).expect("kernels/cuda") {
        println!("cargo:rerun-if-changed={}", entry.unwrap().path().display());
    }

    println!("cargo:rerun-if-env-changed=CUZK_PREBUILT_FATBIN");
    if let Some(pre) = env::var_os("CUZK_PREBUILT_FATBIN") {
        // A fatbin built elsewhere from these sources (CI caches, quick Rust-only iterations).
        println!("cargo:rustc-cfg=cuzk_fatbin");
        println!("cargo:fatbin=1");
        println!(
            "cargo:rustc-env=CUZK_FATBIN={}",
            PathBuf::from(pre).display()
        );
        return;
    }
    let Some(nvcc) = find_nvcc() else {
        println!(
            "cargo:warning=cuzk-kernels: nvcc not found (NVCC, $CUZK_NVCC_PREFIX or \
             ~/.cache/cuzk/nvcc, PATH); building CPU-only. Run scripts/install-nvcc.sh for GPU kernels."
        );
        return;
    };
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("cuzk.fatbin");
    let archs = env::var("CUZK_CUDA_ARCHS")
        .ok()
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "80,86,89,90".to_string());
    let mut cmd = Command::new(&nvcc);
    cmd.arg("-fatbin")
        .arg("-O3")
        .arg("--threads")
        .arg("0")
        .arg("-std=c++17");
    for a in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        cmd.arg("-gencode")
            .arg(format!("arch=compute_{a},code=sm_{a}"));
    }
    cmd.arg("-gencode").arg("arch=compute_90,code=compute_90");
    // Extra nvcc flags, e.g. `-lineinfo` for profiling or `-D` tuning variants of the kernels.
    if let Ok(extra) = env::var("CUZK_NVCC_FLAGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.arg("-o").arg(&out).arg(cuda_dir.join("cuzk.cu"));
    match cmd.output() {
        Ok(o) if o.status.success() => {
            println!("cargo:rustc-cfg=cuzk_fatbin");
            println!("cargo:fatbin=1");
            println!("cargo:rustc-env=CUZK_FATBIN={}", out.display());
        }
        Ok(o) => {
            panic!(
                "nvcc ({}) failed:\n{}\n{}",
                nvcc.display(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Err(e) => {
            println!(
                "cargo:warning=cuzk-kernels: could not run nvcc at {}: {e}; building CPU-only",
                nvcc.display()
            );
        }
    }
}
