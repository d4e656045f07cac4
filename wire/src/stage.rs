//! Every stage a job passes through, named once. A stage's name is the one metrics
//! (`cuzk_stage_duration_seconds{stage}`), spans and log lines use; its record field is the
//! name with `_ms` (the whole job's, `job_total`, is `total_ms` in the record); its label heads the columns of printed tables. `stages!` below declares
//! each stage in one line and makes [`Stage`], the job-level fields of [`JobTimings`] and the
//! per-partition fields of [`PartitionTimings`] from it, so the four cannot drift apart.

use std::time::Duration;

use serde::{Deserialize, Serialize};

macro_rules! stages {
    (
        job { $($(#[doc = $jdoc:literal])* $jstage:ident => $jfield:ident: $jname:literal, $jlabel:literal;)+ }
        partition { $($(#[doc = $pdoc:literal])* $pstage:ident => $pfield:ident: $pname:literal, $plabel:literal;)+ }
    ) => {
        /// A stage of a job's way through the cluster ([module docs](self)).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Stage {
            $($(#[doc = $jdoc])* $jstage,)+
            $($(#[doc = $pdoc])* $pstage,)+
        }

        impl Stage {
            /// What metrics, spans and log lines call the stage.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Stage::$jstage => $jname,)+
                    $(Stage::$pstage => $pname,)+
                }
            }

            /// The stage's column label in printed tables.
            pub const fn label(self) -> &'static str {
                match self {
                    $(Stage::$jstage => $jlabel,)+
                    $(Stage::$pstage => $plabel,)+
                }
            }

            /// The stage's field in job records and results (`<name>_ms`).
            pub const fn field(self) -> &'static str {
                match self {
                    $(Stage::$jstage => stringify!($jfield),)+
                    $(Stage::$pstage => stringify!($pfield),)+
                }
            }
        }

        /// Job-level timings, milliseconds.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct JobTimings {
            $($(#[doc = $jdoc])* pub $jfield: f64,)+
            /// Sums over partitions of each stage.
            pub stages: PartitionTimings,
        }

        /// Per-partition stage timings, milliseconds. Filled in by the synth node, then the GPU
        /// node.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct PartitionTimings {
            $($(#[doc = $pdoc])* pub $pfield: f64,)+
            /// Bytes of the compressed blob on the wire, and of the raw 32-byte-per-element
            /// witness.
            pub blob_bytes: u64,
            pub raw_bytes: u64,
        }

        impl PartitionTimings {
            /// The per-partition stages in pipeline order.
            pub const STAGES: &'static [Stage] = &[$(Stage::$pstage),+];

            /// The per-partition stages in milliseconds, in `STAGES` order.
            pub fn stage_ms(&self) -> Vec<f64> {
                vec![$(self.$pfield),+]
            }

            /// A per-partition stage's milliseconds; a job-level stage has no field here.
            pub fn get(&self, stage: Stage) -> Option<f64> {
                match stage {
                    $(Stage::$pstage => Some(self.$pfield),)+
                    $(Stage::$jstage)|+ => None,
                }
            }

            /// Sets a per-partition stage's time; a job-level stage has no field here.
            pub fn set(&mut self, stage: Stage, took: Duration) {
                let ms = took.as_secs_f64() * 1e3;
                match stage {
                    $(Stage::$pstage => self.$pfield = ms,)+
                    $(Stage::$jstage)|+ => {}
                }
            }

            /// Every field divided by `n`: the mean of `n` partitions whose timings were summed.
            pub fn mean_of(total: &Self, n: u64) -> Self {
                let (d, n) = (n.max(1) as f64, n.max(1));
                PartitionTimings {
                    $($pfield: total.$pfield / d,)+
                    blob_bytes: total.blob_bytes / n,
                    raw_bytes: total.raw_bytes / n,
                }
            }
        }

        impl std::iter::Sum for PartitionTimings {
            fn sum<I: Iterator<Item = PartitionTimings>>(parts: I) -> PartitionTimings {
                parts.fold(PartitionTimings::default(), |acc, t| PartitionTimings {
                    $($pfield: acc.$pfield + t.$pfield,)+
                    blob_bytes: acc.blob_bytes + t.blob_bytes,
                    raw_bytes: acc.raw_bytes + t.raw_bytes,
                })
            }
        }
    };
}

stages! {
    job {
        /// Submission to result.
        Total => total_ms: "job_total", "total";
        /// Submission to a synth node taking the job.
        JobQueue => job_queue_ms: "job_queue", "job queue";
        /// The partition proofs into the job's proof, on the GPU node that proved the last.
        Assemble => assemble_ms: "assemble", "assemble";
    }
    partition {
        /// Witness-only synthesis on the synth node.
        Synth => synth_ms: "synth", "synth";
        Encode => encode_ms: "encode", "encode";
        Upload => upload_ms: "upload", "upload";
        /// From the work item's publication to a GPU worker taking it.
        QueueWait => queue_wait_ms: "queue_wait", "queue";
        Fetch => fetch_ms: "fetch", "fetch";
        Decode => decode_ms: "decode", "decode";
        /// The witness into the prover's memory (host to device on a GPU).
        H2d => h2d_ms: "h2d", "h2d";
        /// Waiting for the device while another partition is proved on it (two workers per
        /// GPU).
        Turn => turn_ms: "turn", "turn";
        /// A·w, B·w, C·w through the shape's matrices.
        Spmv => spmv_ms: "spmv", "SpMV";
        H => h_ms: "h", "H";
        Msm => msm_ms: "msm", "MSM";
        /// The whole proof: h2d, turn, SpMV, H, MSMs and assembly.
        Prove => prove_ms: "prove", "prove";
    }
}

impl Stage {
    /// A partition's stages on the GPU node, in order.
    pub const ON_GPU_NODE: &'static [Stage] = &[
        Stage::QueueWait,
        Stage::Fetch,
        Stage::Decode,
        Stage::H2d,
        Stage::Turn,
        Stage::Spmv,
        Stage::H,
        Stage::Msm,
        Stage::Prove,
    ];
}

impl PartitionTimings {
    pub fn is_zero(&self) -> bool {
        *self == PartitionTimings::default()
    }

    /// The stage labels, right-aligned in 9-character columns (a text table's header).
    pub fn stage_header() -> String {
        Self::STAGES
            .iter()
            .map(|s| format!("{:>9}", s.label()))
            .collect()
    }

    /// The stages in milliseconds, aligned under `stage_header`.
    pub fn stage_cells(&self) -> String {
        self.stage_ms()
            .iter()
            .map(|v| format!("{v:>9.1}"))
            .collect()
    }

    /// The stages' CSV column names (their record fields) and values (`{:.2}`),
    /// comma-separated.
    pub fn stage_csv_header() -> String {
        Self::STAGES
            .iter()
            .map(|s| s.field())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn stage_csv(&self) -> String {
        self.stage_ms()
            .iter()
            .map(|v| format!("{v:.2}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `stages`' times as `field=ms` pairs, for a log line.
    pub fn log_fields(&self, stages: &[Stage]) -> String {
        let ms = self.stage_ms();
        stages
            .iter()
            .filter_map(|s| {
                let i = Self::STAGES.iter().position(|p| p == s)?;
                Some(format!("{}={:.1}", s.field(), ms[i]))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage's record field is its name with `_ms`; the serialized record uses those fields.
    #[test]
    fn each_stage_has_one_name() {
        let mut t = PartitionTimings::default();
        for (i, stage) in PartitionTimings::STAGES.iter().enumerate() {
            assert_eq!(stage.field(), format!("{}_ms", stage.name()));
            t.set(*stage, Duration::from_millis(i as u64 + 1));
        }
        let json = serde_json::to_value(t).unwrap();
        for (i, stage) in PartitionTimings::STAGES.iter().enumerate() {
            assert_eq!(json[stage.field()], (i + 1) as f64, "{stage:?}");
        }
        assert_eq!(Stage::Total.field(), "total_ms");
        for stage in [Stage::Total, Stage::JobQueue, Stage::Assemble] {
            let before = t;
            t.set(stage, Duration::from_secs(1));
            assert_eq!(t, before, "a job-level stage has no partition field");
        }
        let job = serde_json::to_value(JobTimings::default()).unwrap();
        for stage in [Stage::Total, Stage::JobQueue, Stage::Assemble] {
            assert!(job.get(stage.field()).is_some(), "{stage:?}");
        }
        assert_eq!(
            t.log_fields(&[Stage::H2d, Stage::Prove]),
            "h2d_ms=7.0 prove_ms=12.0"
        );
    }
}
