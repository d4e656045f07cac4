//! Compiles `proto/cuzk/v1/proving.proto` (Curio's proving API) into the tonic service and
//! prost messages, with a descriptor set for the reflection service. The protoc used is the
//! one `protoc-bin-vendored` ships, so building needs no system protobuf compiler.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        // Large inputs (a 32 GiB C1 output is ~50 MB) stay one reference-counted buffer from
        // the request body to the object store instead of being copied into a Vec.
        .bytes(".")
        .file_descriptor_set_path(out.join("cuzk_v1_descriptor.bin"))
        .compile_with_config(config, &["proto/cuzk/v1/proving.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/cuzk/v1/proving.proto");
    Ok(())
}
