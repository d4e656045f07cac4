//! The deploy files other than the nats-server configs (`deploy_configs.rs` runs those), and the
//! operator's guide: every repository path they name exists, every metric the dashboard, the
//! alert rules and the docs use is one the code exports, and the units, manifests and image
//! agree with each other and with the code (one parameter directory, metrics ports that stay
//! distinct for any GPU index, the image the Dockerfile builds).

use std::path::{Path, PathBuf};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `deploy/`, and the operator's guide that explains them.
fn deploy_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = vec![repo().join("docs/deploy.md")];
    walk(&repo().join("deploy"), &mut files);
    files.sort();
    files
}

/// `a{b,c}d` → `abd`, `acd` (one brace group, as the docs write them).
fn expand_braces(token: &str) -> Vec<String> {
    match (token.find('{'), token.find('}')) {
        (Some(open), Some(close)) if open < close => token[open + 1..close]
            .split(',')
            .map(|alt| format!("{}{alt}{}", &token[..open], &token[close + 1..]))
            .collect(),
        _ => vec![token.to_owned()],
    }
}

/// Whether `pattern` (with `*` wildcards in its file name only) names something that exists.
fn exists(pattern: &Path) -> bool {
    let name = pattern.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !name.contains('*') {
        return pattern.exists();
    }
    let (prefix, suffix) = name.split_once('*').unwrap();
    std::fs::read_dir(pattern.parent().unwrap())
        .map(|entries| {
            entries.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(prefix) && n.ends_with(suffix)
            })
        })
        .unwrap_or(false)
}

/// The repository paths a text names: tokens whose first component is a top-level entry of
/// the repository (`deploy/nats/auth.conf`, `docs/observability.md`), or `../` relative ones.
fn named_paths(text: &str, top_level: &[String]) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./@*{},%+-".contains(c);
    text.split(|c: char| !is_path_char(c))
        .map(|t| t.trim_end_matches(['.', ',']))
        .filter(|t| {
            t.starts_with("../")
                || t.split_once('/').is_some_and(|(first, rest)| {
                    !rest.is_empty() && top_level.iter().any(|d| d == first)
                })
        })
        .flat_map(expand_braces)
        .collect()
}

#[test]
fn deploy_files_name_only_paths_that_exist() {
    let top_level: Vec<String> = std::fs::read_dir(repo())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target")
        .collect();
    let mut checked = 0;
    let mut missing = Vec::new();
    for file in deploy_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for token in named_paths(&text, &top_level) {
            let base = if token.starts_with("../") {
                file.parent().unwrap().to_owned()
            } else {
                repo()
            };
            checked += 1;
            if !exists(&base.join(&token)) {
                missing.push(format!("{}: {token}", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but missing:\n{}",
        missing.join("\n")
    );
    // The scan finds what it should (a scan that finds nothing proves nothing).
    assert!(checked > 30, "only {checked} paths found");
    let probe = named_paths(
        "see deploy/nats/missing.conf and deploy/nats/cluster/n{1,2}.conf",
        &top_level,
    );
    assert_eq!(
        probe,
        [
            "deploy/nats/missing.conf",
            "deploy/nats/cluster/n1.conf",
            "deploy/nats/cluster/n2.conf"
        ]
    );
    assert!(!exists(&repo().join(&probe[0])));
    assert!(exists(&repo().join(&probe[1])));
}

/// The Prometheus names the code exports: every instrument recorded once into a registry.
fn exported_metric_families() -> Vec<(String, prometheus::proto::MetricType)> {
    use cuzk_common::metrics::{metrics, JobLabels, KeyValue};
    use cuzk_common::telemetry::{self, TelemetryOptions};
    let telemetry = telemetry::init(TelemetryOptions {
        service_name: "deploy-check".into(),
        prometheus: true,
        ..Default::default()
    });
    let m = metrics();
    let job = JobLabels::new("sha256", "sha256-b1");
    m.stage(cuzk_wire::job::Stage::Prove, &job, Duration::from_millis(1));
    m.job("done", &job);
    m.error("gpu", "retry", &job);
    m.refusal(Some("alice"), false);
    m.blob_bytes
        .add(1, &job.with(&[KeyValue::new("direction", "up")]));
    m.codec_ratio.record(2.0, &job.with(&[]));
    m.queue_depth
        .record(1, &[KeyValue::new("stream", "CUZK_WORK")]);
    m.prover_busy.add(1.0, &[KeyValue::new("worker", "cpu.0")]);
    m.heartbeat.record(1.0, &[KeyValue::new("role", "gpu")]);
    let _held = cuzk_common::metrics::InFlight::new("gpu");
    telemetry
        .registry()
        .unwrap()
        .gather()
        .iter()
        .map(|f| (f.name().to_owned(), f.get_field_type()))
        .collect()
}

#[test]
fn dashboards_alerts_and_docs_use_only_exported_metrics() {
    use prometheus::proto::MetricType;
    let families = exported_metric_families();
    let known = |name: &str| {
        families.iter().any(|(f, _)| f == name)
            || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix).is_some_and(|base| {
                    families
                        .iter()
                        .any(|(f, t)| f == base && *t == MetricType::HISTOGRAM)
                })
            })
    };
    for name in ["cuzk_build_info", "cuzk_heartbeat_timestamp_seconds"] {
        assert!(known(name), "{name} is not exported: {families:?}");
    }
    let mut unknown = Vec::new();
    let mut used = 0;
    for file in [
        "deploy/grafana/cuzk.json",
        "deploy/prometheus/cuzk-alerts.yaml",
        "docs/observability.md",
        "docs/deploy.md",
    ] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        for (at, _) in text.match_indices("cuzk_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // Rust paths (`cuzk_prover::prove_timed`) are not metrics.
            if text[at + name.len()..].starts_with("::") {
                continue;
            }
            used += 1;
            if !known(&name) {
                unknown.push(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "not exported by the code:\n{}",
        unknown.join("\n")
    );
    assert!(used > 20, "only {used} metric names found");
    assert!(!known("cuzk_gpu_busy_ratio"));
}

#[test]
fn dashboard_and_alerts_are_well_formed() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/grafana/cuzk.json")).unwrap(),
    )
    .unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels
        .iter()
        .all(|p| !p["targets"].as_array().unwrap().is_empty()));
    let titles: Vec<&str> = panels
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Queue depth",
        "GPU busy",
        "Stage latency p95",
        "Failures and retries",
        "Heartbeat age",
    ] {
        assert!(titles.contains(&wanted), "{titles:?}");
    }
    let rules: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(repo().join("deploy/prometheus/cuzk-alerts.yaml")).unwrap(),
    )
    .unwrap();
    let rules = rules["groups"][0]["rules"].as_array().unwrap();
    assert!(rules.len() >= 5);
    for rule in rules {
        assert!(
            rule["alert"].is_string() && rule["expr"].is_string(),
            "{rule}"
        );
        assert!(rule["annotations"]["summary"].is_string(), "{rule}");
    }
}

/// `key = "value"`, `KEY=value` or `key: value` lines of a file.
fn setting(file: &str, key: &str) -> Vec<String> {
    std::fs::read_to_string(repo().join(file))
        .unwrap()
        .lines()
        .filter_map(|line| {
            let line = line
                .trim()
                .trim_start_matches("- ")
                .trim_start_matches("Environment=");
            let line = line.strip_prefix("ENV ").unwrap_or(line);
            let rest = line.strip_prefix(key)?.trim_start();
            let value = rest.strip_prefix(['=', ':'])?.trim();
            Some(
                value
                    .trim_end_matches('\\')
                    .trim()
                    .trim_matches('"')
                    .to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_deploy_file_uses_one_parameter_directory() {
    let dir = "/var/cache/cuzk/params";
    assert_eq!(setting("deploy/k8s/config.yaml", "cache"), [dir]);
    for unit in [
        "deploy/systemd/cuzk-gpu@.service",
        "deploy/systemd/cuzk-synth.service",
    ] {
        assert_eq!(setting(unit, "CUZK_PARAM_CACHE"), [dir], "{unit}");
    }
    assert_eq!(
        setting("deploy/docker/Dockerfile", "CUZK_PARAM_CACHE"),
        [dir]
    );
    // The GPU pods mount the host's parameter directory exactly there.
    let gpu: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(repo().join("deploy/k8s/gpu.yaml")).unwrap(),
    )
    .unwrap();
    let pod = &gpu["spec"]["template"]["spec"];
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "params")
        .unwrap();
    assert_eq!(mount["mountPath"], dir);
    // filecoin-proofs' default (/var/tmp) is private to a unit with PrivateTmp: unusable there.
    assert_eq!(
        setting("deploy/systemd/cuzk-gpu@.service", "PrivateTmp"),
        ["true"]
    );
}

#[test]
fn gpu_unit_metrics_ports_are_distinct_for_any_gpu_index() {
    #[derive(clap::Parser)]
    struct Args {
        #[command(flatten)]
        telemetry: cuzk_common::telemetry::TelemetryArgs,
    }
    let addr = setting("deploy/systemd/cuzk-gpu@.service", "CUZK_METRICS_ADDR");
    let offset = setting(
        "deploy/systemd/cuzk-gpu@.service",
        "CUZK_METRICS_PORT_OFFSET",
    );
    let mut ports = std::collections::BTreeSet::new();
    for gpu in [0, 1, 9, 10, 11, 31] {
        // systemd expands %i to the instance name, the device index.
        let offset = offset[0].replace("%i", &gpu.to_string());
        let args = <Args as clap::Parser>::try_parse_from([
            "cuzk",
            "--metrics-addr",
            &addr[0],
            "--metrics-port-offset",
            &offset,
        ])
        .unwrap();
        let port = args.telemetry.metrics_addr().unwrap().unwrap().port();
        assert_eq!(port, 9470 + gpu, "GPU {gpu}");
        ports.insert(port);
    }
    assert_eq!(ports.len(), 6);
}

#[test]
fn k8s_runs_the_image_the_dockerfile_builds() {
    let tag = format!("cuzk:{}", env!("CARGO_PKG_VERSION"));
    let dockerfile = std::fs::read_to_string(repo().join("deploy/docker/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(&format!("-t {tag} .")),
        "the Dockerfile documents building {tag}"
    );
    assert!(
        dockerfile.contains("--bin cuzk "),
        "and builds the cuzk binary"
    );
    for manifest in [
        "deploy/k8s/gpu.yaml",
        "deploy/k8s/synth.yaml",
        "deploy/k8s/gateway.yaml",
        "deploy/k8s/ledger.yaml",
    ] {
        assert_eq!(setting(manifest, "image"), [tag.as_str()], "{manifest}");
    }
}
