//! A plan in words and numbers: what the node logs at key load and `--explain-plan` prints.

use cuzk_prover::params::Query;

use super::{gib, HStage, Placement, Plan, PlanShape};

impl Plan {
    /// A table of where each part of the key lives and what each phase holds, for `name`.
    pub fn explain(&self, shape: &PlanShape, name: &str) -> String {
        let mut out = format!(
            "{name}: {} at a {:.2} GiB device budget, MSMs in passes of up to 2^{:.1} points (H: 2^{:.1})\n",
            self.summary(),
            gib(self.budget),
            (self.chunk as f64).log2(),
            (self.h_chunk as f64).log2()
        );
        out.push_str("| part | GiB | where |\n|---|---|---|\n");
        let place = |p: Placement| match p {
            Placement::Resident => "device",
            Placement::Streamed => "pinned host memory, streamed",
        };
        for (i, q) in Query::ALL.iter().enumerate() {
            out.push_str(&format!(
                "| SRS {} ({} points) | {:.2} | {} |\n",
                query_name(*q),
                shape.points[i],
                gib(shape.section_bytes(i)),
                place(self.srs[i])
            ));
        }
        for (i, m) in ["A", "B", "C"].iter().enumerate() {
            out.push_str(&format!(
                "| matrix {m} | {:.2} | {} |\n",
                gib(shape.matrices[i]),
                place(self.matrices[i])
            ));
        }
        out.push_str(&format!(
            "| coefficients and packing maps | {:.2} | device |\n",
            gib(shape.fixed)
        ));
        for p in &self.phases {
            out.push_str(&format!(
                "| working: {} | {:.2} | device |\n",
                p.name,
                gib(p.bytes)
            ));
        }
        out.push_str(&format!(
            "device: {:.2} GiB resident + {:.2} GiB working = {:.2} GiB of {:.2}; key bytes streamed per partition: {:.2} GiB (in a full batch)\n",
            gib(self.resident),
            gib(self.working()),
            gib(self.total()),
            gib(self.budget),
            gib(self.streamed_bytes(shape))
        ));
        out
    }

    /// One line: the H stage and how much of the key streams.
    pub fn summary(&self) -> String {
        let stage = match self.h_stage {
            HStage::Full { witnesses } if self.lanes > 1 => format!(
                "full H stage, {witnesses} witness(es) on the device, {} partitions at once",
                self.lanes
            ),
            HStage::Full { witnesses } => {
                format!("full H stage, {witnesses} witness(es) on the device")
            }
            HStage::Lean => "lean H stage".into(),
        };
        let streamed: Vec<&str> = Query::ALL
            .iter()
            .zip(self.srs)
            .filter(|(_, p)| *p == Placement::Streamed)
            .map(|(q, _)| query_name(*q))
            .chain(
                ["matrix A", "matrix B", "matrix C"]
                    .into_iter()
                    .zip(self.matrices)
                    .filter(|(_, p)| *p == Placement::Streamed)
                    .map(|(m, _)| m),
            )
            .collect();
        if streamed.is_empty() {
            format!("{stage}, key resident")
        } else if self.batch > 1 {
            format!(
                "{stage}, streaming {}; L, A and B passes shared by up to {} partitions",
                streamed.join(", "),
                self.batch
            )
        } else {
            format!("{stage}, streaming {}", streamed.join(", "))
        }
    }
}

pub(super) fn query_name(q: Query) -> &'static str {
    match q {
        Query::H => "H",
        Query::L => "L",
        Query::A => "A",
        Query::BG1 => "B_G1",
        Query::BG2 => "B_G2",
    }
}
