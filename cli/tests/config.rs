//! What `--check-config` resolves, flag > environment > file > default: the parameter
//! directory of `cuzk gpu-node` — the flag, then `CUZK_PARAM_CACHE`, then
//! `FIL_PROOFS_PARAMETER_CACHE` (filecoin-proofs' name, which lotus and Curio hosts already
//! set), then the config file; the file's key is below both environment twins — and the
//! `[gateway]` table of `cuzk gateway`. Each case runs the binary with exactly the environment
//! it names.

use std::process::Command;

/// `cuzk COMMAND --check-config ARGS` under `env` only: the resolved configuration.
fn check_config(command: &str, env: &[(&str, &str)], args: &[&str]) -> serde_json::Value {
    let mut cuzk = Command::new(env!("CARGO_BIN_EXE_cuzk"));
    cuzk.env_clear()
        .env("HOME", "/home/operator")
        .args([command, "--check-config"])
        .args(args);
    for (key, value) in env {
        cuzk.env(key, value);
    }
    let output = cuzk.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn resolved_param_cache(env: &[(&str, &str)], args: &[&str]) -> serde_json::Value {
    check_config("gpu-node", env, args)["params"]["cache"].clone()
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

#[test]
fn gateway_settings_rank_flag_env_file_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cuzk.toml");
    std::fs::write(
        &file,
        "[gateway]\nlisten = \"unix:/from/file.sock\"\nmax_wait_secs = 30\nsrs_timeout_secs = 40\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let resolved = |env: &[(&str, &str)], args: &[&str]| {
        let config = check_config("gateway", env, args)["gateway"].clone();
        (
            config["listen"].as_str().unwrap().to_owned(),
            config["max_wait"]["secs"].as_u64().unwrap(),
            config["srs_timeout"]["secs"].as_u64().unwrap(),
            config["max_message_bytes"].as_u64().unwrap(),
        )
    };
    let listen = |s: &str| s.to_owned();
    assert_eq!(
        resolved(&[], &[]),
        (listen("127.0.0.1:9820"), 24 * 3600, 600, 128 << 20)
    );
    assert_eq!(
        resolved(&[], &["--config", file]),
        (listen("unix:/from/file.sock"), 30, 40, 128 << 20)
    );
    let env = [
        ("CUZK_GATEWAY_LISTEN", "127.0.0.1:7000"),
        ("CUZK_GATEWAY_MAX_WAIT_SECS", "20"),
        ("CUZK_GATEWAY_MAX_MESSAGE_BYTES", "8388608"),
    ];
    assert_eq!(
        resolved(&env, &["--config", file]),
        (listen("127.0.0.1:7000"), 20, 40, 8 << 20)
    );
    let flags = ["--config", file, "--listen", "unix:///from/flag.sock"];
    let flags = [&flags[..], &["--max-wait-secs", "10"]].concat();
    assert_eq!(
        resolved(&env, &flags),
        (listen("unix:/from/flag.sock"), 10, 40, 8 << 20)
    );
    // The gateway's TLS flags beside the NATS ones of the same names (clap ids of their own).
    let args = ["--tls-cert", file, "--tls-key", file, "--max-calls", "7"];
    let tls = check_config("gateway", &[], &args)["gateway"].clone();
    assert_eq!(
        (tls["tls_cert"].as_str(), tls["max_calls"].as_u64()),
        (Some(file), Some(7))
    );
}

/// Time and byte settings take units in flags, variables and files; their older `…-secs`
/// names still work, below the new ones; `--help` shows each default and the old name.
#[test]
fn settings_take_units_and_answer_to_their_old_names() {
    let synth = |env: &[(&str, &str)], args: &[&str]| {
        let synth = check_config("synth-node", env, args)["synth"].clone();
        (
            synth["drain_timeout"]["secs"].as_u64().unwrap(),
            synth["no_progress_timeout"]["secs"].as_u64().unwrap(),
            synth["max_queued_bytes"].as_u64().unwrap(),
        )
    };
    assert_eq!(synth(&[], &[]), (60, 3600, 8 << 30));
    let env = [("CUZK_SYNTH_DRAIN_TIMEOUT", "2m")];
    let args = [
        "--synth-max-queued-bytes",
        "2GiB",
        "--synth-no-progress-timeout",
        "1.5h",
    ];
    assert_eq!(synth(&env, &args), (120, 5400, 2 << 30));

    let old = [("CUZK_SYNTH_DRAIN_TIMEOUT_SECS", "7")];
    let args = ["--synth-no-progress-timeout-secs", "9"];
    assert_eq!(synth(&old, &args), (7, 9, 8 << 30));
    let both = [old[0], ("CUZK_SYNTH_DRAIN_TIMEOUT", "8s")];
    assert_eq!(synth(&both, &[]).0, 8, "the new name wins");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cuzk.toml");
    std::fs::write(
        &file,
        "[synth]\ndrain_timeout = \"3m\"\nmax_queued_bytes = \"1GiB\"\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    assert_eq!(synth(&[], &["--config", file]), (180, 3600, 1 << 30));

    let help = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["synth-node", "--help"])
        .env_clear()
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 1h]"), "{help}");
    assert!(help.contains("--synth-no-progress-timeout-secs"), "{help}");
}
