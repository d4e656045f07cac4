//! The parameter directory `cuzk gpu-node --check-config` resolves: the flag, then
//! `CUZK_PARAM_CACHE`, then `FIL_PROOFS_PARAMETER_CACHE` (filecoin-proofs' name, which lotus and
//! Curio hosts already set), then the config file; the file's key is below both environment
//! twins. Each case runs the binary with exactly the environment it names.

use std::process::Command;

fn resolved_param_cache(env: &[(&str, &str)], args: &[&str]) -> serde_json::Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cuzk"));
    command
        .env_clear()
        .env("HOME", "/home/operator")
        .args(["gpu-node", "--check-config"])
        .args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let config: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    config["params"]["cache"].clone()
}

#[test]
fn param_cache_twins_rank_between_flag_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cuzk.toml");
    std::fs::write(&file, "[params]\ncache = \"/from/file\"\n").unwrap();
    let file = file.to_str().unwrap();
    let fil = ("FIL_PROOFS_PARAMETER_CACHE", "/from/fil");
    let cuzk = ("CUZK_PARAM_CACHE", "/from/cuzk");

    assert_eq!(resolved_param_cache(&[], &[]), serde_json::Value::Null);
    assert_eq!(resolved_param_cache(&[], &["--config", file]), "/from/file");
    assert_eq!(
        resolved_param_cache(&[fil], &["--config", file]),
        "/from/fil"
    );
    assert_eq!(
        resolved_param_cache(&[fil, cuzk], &["--config", file]),
        "/from/cuzk"
    );
    assert_eq!(
        resolved_param_cache(&[fil, cuzk], &["--param-cache", "/from/flag"]),
        "/from/flag"
    );
}
