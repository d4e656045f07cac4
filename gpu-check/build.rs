//! The check binary's GPU code compiles only where cuzk-kernels embedded its kernels.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(cuzk_fatbin)");
    println!("cargo:rerun-if-env-changed=DEP_CUZK_KERNELS_FATBIN");
    if std::env::var_os("DEP_CUZK_KERNELS_FATBIN").is_some() {
        println!("cargo:rustc-cfg=cuzk_fatbin");
    }
}
