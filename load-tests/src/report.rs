//! What a run measured, as a summary table, CSV files and an SVG plot (written by hand: a
//! plotting crate would be a large dependency for three polylines).

use std::fmt::Write as _;
use std::path::Path;

use cuzk_wire::job::PartitionTimings;

use crate::load::RunData;

/// Headline numbers of one run.
pub struct Summary {
    pub jobs: usize,
    pub done: usize,
    pub failed: usize,
    pub lost: usize,
    /// First submission to last result, seconds.
    pub wall_s: f64,
    pub jobs_per_s: f64,
    pub partitions_per_s: f64,
    pub p50_s: f64,
    pub p95_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
    /// Mean over proved partitions.
    pub stages: PartitionTimings,
    pub wire_bytes: u64,
    pub raw_bytes: u64,
    /// Per worker, over the wall time.
    pub busy: Vec<(String, f64)>,
    pub work_depth_mean: Option<f64>,
    pub work_depth_max: Option<u64>,
    pub jobs_depth_max: Option<u64>,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Summary {
    pub fn of(data: &RunData) -> Summary {
        let jobs = data.outcomes.len();
        let done = data.outcomes.iter().filter(|o| o.done()).count();
        let answered = data.outcomes.iter().filter(|o| o.result.is_some()).count();
        let first = data
            .outcomes
            .iter()
            .map(|o| o.submitted_s)
            .fold(f64::INFINITY, f64::min);
        let last = data
            .outcomes
            .iter()
            .filter_map(|o| o.completed_s)
            .fold(0.0, f64::max);
        let wall_s = (last - first).max(1e-9);
        let mut latencies: Vec<f64> = data
            .outcomes
            .iter()
            .filter(|o| o.done())
            .filter_map(|o| o.latency_s())
            .collect();
        latencies.sort_by(f64::total_cmp);
        let parts: Vec<PartitionTimings> = data
            .outcomes
            .iter()
            .filter(|o| o.done())
            .flat_map(|o| {
                o.result
                    .as_ref()
                    .expect("done")
                    .partition_timings
                    .iter()
                    .copied()
            })
            .collect();
        let total: PartitionTimings = parts.iter().copied().sum();
        let stages = PartitionTimings::mean_of(&total, parts.len() as u64);
        let last_sample = data.samples.last();
        let busy = data
            .workers
            .iter()
            .map(|w| {
                let seconds = last_sample
                    .and_then(|s| s.busy.get(w))
                    .copied()
                    .unwrap_or(0.0);
                (w.clone(), seconds / wall_s)
            })
            .collect();
        let work: Vec<u64> = data.samples.iter().filter_map(|s| s.work_depth).collect();
        Summary {
            jobs,
            done,
            failed: answered - done,
            lost: jobs - answered,
            wall_s,
            jobs_per_s: done as f64 / wall_s,
            partitions_per_s: (done * data.partitions) as f64 / wall_s,
            p50_s: percentile(&latencies, 50.0),
            p95_s: percentile(&latencies, 95.0),
            p99_s: percentile(&latencies, 99.0),
            max_s: latencies.last().copied().unwrap_or(f64::NAN),
            stages,
            wire_bytes: total.blob_bytes,
            raw_bytes: total.raw_bytes,
            busy,
            work_depth_mean: (!work.is_empty())
                .then(|| work.iter().sum::<u64>() as f64 / work.len() as f64),
            work_depth_max: work.iter().max().copied(),
            jobs_depth_max: data.samples.iter().filter_map(|s| s.jobs_depth).max(),
        }
    }

    pub fn mean_busy(&self) -> f64 {
        if self.busy.is_empty() {
            return f64::NAN;
        }
        self.busy.iter().map(|(_, b)| b).sum::<f64>() / self.busy.len() as f64
    }
}

const MIB: f64 = 1024.0 * 1024.0;

pub fn table(data: &RunData, s: &Summary) -> String {
    let mut out = String::new();
    let t = &s.stages;
    let _ = writeln!(out, "\n== {} — {} ==", data.label, data.description);
    let _ = writeln!(
        out,
        "{} {} × {} partitions, {}: {} submitted, {} done, {} failed, {} lost",
        data.circuit, data.params, data.partitions, data.mode, s.jobs, s.done, s.failed, s.lost
    );
    let _ = writeln!(
        out,
        "wall {:.2} s · {:.3} jobs/s · {:.3} partitions/s · latency p50 {:.2} s p95 {:.2} s p99 {:.2} s max {:.2} s",
        s.wall_s, s.jobs_per_s, s.partitions_per_s, s.p50_s, s.p95_s, s.p99_s, s.max_s
    );
    let _ = writeln!(
        out,
        "{}   (ms per partition, mean)\n{}",
        PartitionTimings::stage_header(),
        t.stage_cells()
    );
    if s.wire_bytes > 0 {
        let _ = writeln!(
            out,
            "wire: {:.3} MiB per partition ({:.2} MiB raw, codec {:.0}×), {:.2} MiB in all, {:.2} MiB/s",
            t.blob_bytes as f64 / MIB,
            t.raw_bytes as f64 / MIB,
            s.raw_bytes as f64 / s.wire_bytes.max(1) as f64,
            s.wire_bytes as f64 / MIB,
            s.wire_bytes as f64 / MIB / s.wall_s
        );
    }
    for (worker, busy) in &s.busy {
        let _ = writeln!(out, "prover busy {worker}: {:.1} %", busy * 100.0);
    }
    if s.busy.is_empty() {
        let _ = writeln!(
            out,
            "prover busy: no worker reported proving time (no metrics endpoint?)"
        );
    }
    if let (Some(mean), Some(max)) = (s.work_depth_mean, s.work_depth_max) {
        let _ = writeln!(
            out,
            "queue CUZK_WORK: mean {mean:.1}, max {max} partitions waiting; CUZK_JOBS max {}",
            s.jobs_depth_max.map_or("?".into(), |m| m.to_string())
        );
    }
    out
}

/// Runs side by side.
pub fn comparison(runs: &[(&RunData, &Summary)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| run | jobs | wall s | jobs/s | partitions/s | p50 s | p95 s | prover busy (mean of workers) | synth ms/part | prove ms/part | queue wait ms/part | max work queue |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (data, s) in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {:.3} | {:.3} | {:.2} | {:.2} | {:.1} % ({} workers) | {:.0} | {:.0} | {:.0} | {} |",
            data.label,
            s.done,
            s.wall_s,
            s.jobs_per_s,
            s.partitions_per_s,
            s.p50_s,
            s.p95_s,
            s.mean_busy() * 100.0,
            s.busy.len(),
            s.stages.synth_ms,
            s.stages.prove_ms,
            s.stages.queue_wait_ms,
            s.work_depth_max.map_or("–".into(), |m| m.to_string()),
        );
    }
    out
}

pub fn write_summary_csv(path: &Path, runs: &[(&RunData, &Summary)]) -> anyhow::Result<()> {
    let mut out = format!("run,description,jobs_done,failed,lost,wall_s,jobs_per_s,partitions_per_s,p50_s,p95_s,p99_s,mean_busy,workers,{},blob_bytes_per_partition,raw_bytes_per_partition,max_work_depth\n", PartitionTimings::stage_csv_header());
    for (data, s) in runs {
        let t = &s.stages;
        let _ = writeln!(
            out,
            "{},\"{}\",{},{},{},{:.3},{:.4},{:.4},{:.3},{:.3},{:.3},{:.4},{},{},{},{},{}",
            data.label,
            data.description.replace('"', "'"),
            s.done,
            s.failed,
            s.lost,
            s.wall_s,
            s.jobs_per_s,
            s.partitions_per_s,
            s.p50_s,
            s.p95_s,
            s.p99_s,
            s.mean_busy(),
            s.busy.len(),
            t.stage_csv(),
            t.blob_bytes,
            t.raw_bytes,
            s.work_depth_max.map_or(String::new(), |m| m.to_string()),
        );
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// One row per job: when it went in and out, and its stage sums over partitions.
pub fn write_jobs_csv(path: &Path, data: &RunData) -> anyhow::Result<()> {
    let mut out = format!(
        "job_id,submitted_s,completed_s,latency_s,status,{},blob_bytes,raw_bytes,error\n",
        PartitionTimings::stage_csv_header()
    );
    for o in &data.outcomes {
        let status = o.result.as_ref().map_or("lost".to_owned(), |r| {
            format!("{:?}", r.status).to_lowercase()
        });
        let t = o
            .result
            .as_ref()
            .map(|r| r.timings.stages)
            .unwrap_or_default();
        let error = o
            .result
            .as_ref()
            .and_then(|r| r.error.clone())
            .unwrap_or_default()
            .replace('"', "'");
        let _ = writeln!(
            out,
            "{},{:.3},{},{},{},{},{},{},\"{}\"",
            o.job_id,
            o.submitted_s,
            o.completed_s.map_or(String::new(), |c| format!("{c:.3}")),
            o.latency_s().map_or(String::new(), |l| format!("{l:.3}")),
            status,
            t.stage_csv(),
            t.blob_bytes,
            t.raw_bytes,
            error
        );
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// Rates at one sample: over the trailing window, so that counters that move in steps (a
/// busy counter grows when a proof ends) read as the fraction they average to.
pub struct Point {
    pub t_s: f64,
    pub jobs_per_s: f64,
    pub partitions_per_s: f64,
    pub work_depth: Option<u64>,
    /// Busy fraction per worker, in `RunData::workers` order.
    pub busy: Vec<f64>,
}

pub fn series(data: &RunData, window_s: f64) -> Vec<Point> {
    let window_s = window_s.max(1e-3);
    let samples = &data.samples;
    samples
        .iter()
        .enumerate()
        .map(|(i, now)| {
            // The latest sample at least `window_s` back (or the first one).
            let back = samples[..=i]
                .iter()
                .rev()
                .find(|s| now.t_s - s.t_s >= window_s)
                .unwrap_or(&samples[0]);
            let dt = (now.t_s - back.t_s).max(1e-9);
            let rate = |a: f64, b: f64| {
                if now.t_s > back.t_s {
                    (a - b) / dt
                } else {
                    0.0
                }
            };
            Point {
                t_s: now.t_s,
                jobs_per_s: rate(now.jobs_done as f64, back.jobs_done as f64),
                partitions_per_s: rate(now.partitions_done as f64, back.partitions_done as f64),
                work_depth: now.work_depth,
                busy: data
                    .workers
                    .iter()
                    .map(|w| {
                        let get = |s: &crate::load::Sample| s.busy.get(w).copied().unwrap_or(0.0);
                        rate(get(now), get(back)).clamp(0.0, 1.0)
                    })
                    .collect(),
            }
        })
        .collect()
}

pub fn write_series_csv(path: &Path, data: &RunData, points: &[Point]) -> anyhow::Result<()> {
    let mut out = String::from(
        "t_s,jobs_done,partitions_done,jobs_per_s,partitions_per_s,work_depth,jobs_depth",
    );
    for worker in &data.workers {
        let _ = write!(out, ",busy_{worker}");
    }
    out.push('\n');
    for (sample, point) in data.samples.iter().zip(points) {
        let _ = write!(
            out,
            "{:.3},{},{},{:.4},{:.4},{},{}",
            sample.t_s,
            sample.jobs_done,
            sample.partitions_done,
            point.jobs_per_s,
            point.partitions_per_s,
            sample.work_depth.map_or(String::new(), |d| d.to_string()),
            sample.jobs_depth.map_or(String::new(), |d| d.to_string()),
        );
        for busy in &point.busy {
            let _ = write!(out, ",{busy:.4}");
        }
        out.push('\n');
    }
    std::fs::write(path, out)?;
    Ok(())
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" upper bound for an axis.
fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= max {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

/// A plotted series: label, colour, (t, value) points.
type Line<'a> = (String, &'a str, Vec<(f64, f64)>);

/// One panel: series over a shared time axis.
fn panel(svg: &mut String, top: f64, title: &str, y_max: f64, t_max: f64, lines: &[Line<'_>]) {
    const LEFT: f64 = 70.0;
    const WIDTH: f64 = 620.0;
    const HEIGHT: f64 = 150.0;
    let x = |t: f64| LEFT + WIDTH * t / t_max;
    let y = |v: f64| top + HEIGHT - HEIGHT * (v / y_max).clamp(0.0, 1.0);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
        top - 8.0,
        escape(title)
    );
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{top}" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#888"/>"##
    );
    for i in 0..=4 {
        let v = y_max * i as f64 / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            LEFT + WIDTH,
            LEFT - 5.0,
            y(v) + 4.0,
            if y_max >= 10.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            },
            yy = y(v),
        );
    }
    for i in 0..=5 {
        let t = t_max * i as f64 / 5.0;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle">{t:.0} s</text>"#,
            x(t),
            top + HEIGHT + 14.0
        );
    }
    for (index, (label, color, points)) in lines.iter().enumerate() {
        let path: Vec<String> = points
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{}"/>"#,
            path.join(" ")
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" font-size="11" fill="{color}">{}</text>"#,
            LEFT + WIDTH + 8.0,
            top + 12.0 + 14.0 * index as f64,
            escape(label)
        );
    }
}

/// Throughput, prover busy fraction per worker and work-queue depth over time.
pub fn svg(data: &RunData, summary: &Summary, points: &[Point]) -> String {
    let t_max = nice_max(points.last().map_or(1.0, |p| p.t_s));
    let has_queue = points.iter().any(|p| p.work_depth.is_some());
    let height = if has_queue { 660 } else { 460 };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" font-family="sans-serif">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="20" y="24" font-size="15" font-weight="bold">{}: {} {} × {} partitions, {}</text>"#,
        escape(&data.label),
        escape(&data.circuit),
        escape(&data.params.to_string()),
        data.partitions,
        data.mode
    );
    let _ = writeln!(
        svg,
        r#"<text x="20" y="42" font-size="12">{} — {:.3} jobs/s, {:.3} partitions/s, mean prover busy {:.1} %, p50 {:.2} s</text>"#,
        escape(&data.description),
        summary.jobs_per_s,
        summary.partitions_per_s,
        summary.mean_busy() * 100.0,
        summary.p50_s
    );
    let throughput: Vec<(f64, f64)> = points.iter().map(|p| (p.t_s, p.partitions_per_s)).collect();
    let y_max = nice_max(throughput.iter().map(|p| p.1).fold(0.0, f64::max));
    panel(
        &mut svg,
        80.0,
        "partitions proved per second (trailing window)",
        y_max,
        t_max,
        &[("partitions/s".into(), COLORS[0], throughput)],
    );
    let busy_lines: Vec<_> = data
        .workers
        .iter()
        .enumerate()
        .map(|(i, w)| {
            (
                w.clone(),
                COLORS[i % COLORS.len()],
                points.iter().map(|p| (p.t_s, p.busy[i])).collect(),
            )
        })
        .collect();
    panel(
        &mut svg,
        280.0,
        "prover busy fraction per worker (trailing window)",
        1.0,
        t_max,
        &busy_lines,
    );
    if has_queue {
        let depth: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| p.work_depth.map(|d| (p.t_s, d as f64)))
            .collect();
        let y_max = nice_max(depth.iter().map(|p| p.1).fold(0.0, f64::max));
        panel(
            &mut svg,
            480.0,
            "partitions waiting in CUZK_WORK",
            y_max,
            t_max,
            &[("CUZK_WORK".into(), COLORS[1], depth)],
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 95.0), 95.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&[3.0], 99.0), 3.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn nice_axis_bounds() {
        assert_eq!(nice_max(0.83), 1.0);
        assert_eq!(nice_max(3.2), 5.0);
        assert_eq!(nice_max(17.0), 20.0);
        assert_eq!(nice_max(0.0), 1.0);
    }
}
