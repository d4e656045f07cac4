//! Each node's resident memory over a soak, sampled from `/proc`, and its growth past warm-up.

use std::collections::BTreeMap;
use std::time::Instant;

use cuzk_cli::launcher::{ProcessCluster, Role};

/// Per node: (seconds into the run, resident bytes).
pub(super) type Rss = BTreeMap<String, Vec<(f64, u64)>>;

pub(super) fn sample_rss(cluster: &ProcessCluster, start: Instant, rss: &mut Rss) {
    let t = start.elapsed().as_secs_f64();
    for name in cluster
        .nodes(Role::Synth)
        .into_iter()
        .chain(cluster.nodes(Role::Gpu))
        .chain(cluster.nodes(Role::Ledger))
    {
        let Some(pid) = cluster.pid(&name) else {
            continue;
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kib = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
        if let Some(kib) = kib {
            rss.entry(name).or_default().push((t, kib * 1024));
        }
    }
}

/// Per node whose load outlasted its own warm-up by two windows (counted from its first sample:
/// a restarted node warms up again): the median of its resident memory over the window right
/// after the warm-up, and over the last window before it died or the submissions ended.
pub(super) fn growth(
    rss: &Rss,
    warmup_s: f64,
    window_s: f64,
    load_end_s: f64,
) -> Vec<(String, u64, u64)> {
    let median = |from: f64, to: f64, samples: &[(f64, u64)]| {
        let mut v: Vec<u64> = samples
            .iter()
            .filter(|(t, _)| (from..=to).contains(t))
            .map(|s| s.1)
            .collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    rss.iter()
        .filter_map(|(name, samples)| {
            let first = samples.first()?.0 + warmup_s;
            let last = samples.iter().rev().find(|(t, _)| *t <= load_end_s)?.0;
            if last - window_s < first + window_s {
                return None;
            }
            Some((
                name.clone(),
                median(first, first + window_s, samples)?,
                median(last - window_s, last, samples)?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_compares_medians_of_a_window_after_the_warm_up_and_the_last_of_load() {
        let mut rss = Rss::new();
        // Warm-up to 60 s; windows of 30 s; load ends at 600 s. A spike in each window moves
        // neither median; the idle sample after the load is left out.
        rss.insert(
            "a".into(),
            vec![
                (0.0, 10),
                (60.0, 100),
                (70.0, 300),
                (80.0, 101),
                (500.0, 104),
                (580.0, 105),
                (590.0, 1),
                (600.0, 106),
                (700.0, 50),
            ],
        );
        // Dies before two windows past its warm-up.
        rss.insert("b".into(), vec![(0.0, 10), (60.0, 20), (100.0, 20)]);
        // Restarted at 100 s: its own warm-up, killed at 400 s.
        rss.insert(
            "c".into(),
            vec![
                (100.0, 1),
                (170.0, 50),
                (190.0, 52),
                (380.0, 55),
                (400.0, 56),
            ],
        );
        assert_eq!(
            growth(&rss, 60.0, 30.0, 600.0),
            vec![("a".into(), 101, 105), ("c".into(), 52, 56)]
        );
    }
}
