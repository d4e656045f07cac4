use super::*;

const GIB: u64 = 1 << 30;

/// A 32 GiB PoRep partition: domain 2^27, 130 M variables, the 47.4 GB SRS (B about 33 M
/// points), the 7.3 GB matrices (docs/porep.md).
fn porep_32g() -> PlanShape {
    PlanShape {
        inputs: 329,
        aux: 130_169_893,
        m: 1 << 27,
        points: [
            (1 << 27) - 1,
            130_169_893,
            130_000_000,
            33_000_000,
            33_000_000,
        ],
        matrices: [3_000_000_000, 1_560_000_000, 2_770_000_000],
        fixed: 650_000_000,
    }
}

/// A 2 KiB PoRep partition: domain 2^22, 2.7 M variables, ~1 GiB of SRS.
fn porep_2k() -> PlanShape {
    PlanShape {
        inputs: 40,
        aux: 2_685_673,
        m: 1 << 22,
        points: [(1 << 22) - 1, 2_685_673, 2_680_000, 700_000, 700_000],
        matrices: [60_000_000, 32_000_000, 58_000_000],
        fixed: 14_000_000,
    }
}

fn plan(shape: &PlanShape, budget_gib: f64) -> Result<Plan, PlanError> {
    choose(
        shape,
        (budget_gib * GIB as f64) as u64,
        2,
        1,
        PlanLimits::default(),
    )
}

#[test]
fn a_whole_h200_keeps_everything_and_proves_in_one_pass() {
    let shape = porep_32g();
    let p = plan(&shape, 139.0).unwrap();
    assert_eq!(p.h_stage, HStage::Full { witnesses: 2 });
    assert!(!p.streams());
    assert!(p.chunk >= shape.points[0], "one pass for H: {}", p.chunk);
    assert_eq!(p.resident, shape.key_bytes());
}

#[test]
fn every_card_class_gets_a_plan_within_its_budget() {
    let shape = porep_32g();
    let mut last_cost = f64::MAX;
    for budget in [15.0, 22.0, 30.0, 44.0, 75.0, 139.0] {
        let p = plan(&shape, budget).unwrap();
        assert!(
            p.total() <= p.budget,
            "{budget}: {}",
            p.explain(&shape, "32 GiB")
        );
        // More memory never costs more (it may stream a matrix more to batch more partitions).
        let cost = p.cost(&shape);
        assert!(
            cost <= last_cost,
            "{budget}: {cost} {}",
            p.explain(&shape, "32 GiB")
        );
        last_cost = cost;
    }
    // An 80 GB card holds the key and one witness at a time; a 16 GB card streams most of it.
    let p75 = plan(&shape, 75.0).unwrap();
    assert_eq!(p75.h_stage, HStage::Full { witnesses: 1 });
    assert!(!p75.streams());
    // A little more holds two witnesses, but only with passes of 2^24 points: one witness and
    // passes twice as large cost fewer passes, and were faster.
    let p77 = plan(&shape, 77.0).unwrap();
    assert_eq!(p77.h_stage, HStage::Full { witnesses: 1 });
    assert_eq!(
        (p77.chunk, p77.passes(&shape)),
        (p75.chunk, p75.passes(&shape))
    );
    let two = |chunk| {
        build(
            &shape,
            p77.budget,
            HStage::Full { witnesses: 2 },
            (chunk, chunk),
            [true; 8],
            1,
            1,
        )
    };
    assert!(two(p77.chunk).total() > p77.budget && two(p77.chunk / 2).total() <= p77.budget);
    let p15 = plan(&shape, 15.0).unwrap();
    assert_eq!(p15.h_stage, HStage::Lean);
    assert!(p15.srs.iter().all(|&s| s == Placement::Streamed));
    assert!(p15.chunk >= MIN_CHUNK && p15.chunk <= MAX_STREAM_CHUNK);
}

#[test]
fn h_takes_the_largest_passes_its_phase_has_room_for() {
    let shape = porep_32g();
    for budget in [15.0, 22.0, 30.0, 75.0, 139.0] {
        let p = plan(&shape, budget).unwrap();
        assert!(
            p.h_chunk >= p.chunk,
            "{budget}: {}",
            p.explain(&shape, "32 GiB")
        );
        assert!(p.total() <= p.budget);
    }
    // A 16 GB card: H's MSM runs while neither the witness nor A·w or B·w is on the device,
    // so its passes are the largest a streamed section takes.
    let p15 = plan(&shape, 15.0).unwrap();
    assert_eq!(p15.h_chunk, MAX_STREAM_CHUNK);
    // B in G2 takes half the points of the other sections a pass (as many bytes).
    assert_eq!(p15.section_chunk(4), p15.chunk / 2);
    assert_eq!(
        p15.passes(&shape),
        shape.points[0].div_ceil(p15.h_chunk)
            + shape.points[1..4]
                .iter()
                .map(|n| n.div_ceil(p15.chunk))
                .sum::<usize>()
            + shape.points[4].div_ceil(p15.chunk / 2)
    );
}

#[test]
fn lean_plans_keep_the_parts_that_hide_least_first() {
    let shape = porep_32g();
    // One worker: no batch competes with the key for the room.
    let p = choose(&shape, 30 * GIB, 1, 1, PlanLimits::default()).unwrap();
    assert_eq!(p.batch, 1);
    assert_eq!(p.h_stage, HStage::Lean);
    // The matrices before any SRS section; H, whose MSM hides its copies best, streams.
    assert!(p.matrices.iter().all(|&m| m == Placement::Resident));
    assert_eq!(p.srs[0], Placement::Streamed);
    assert_eq!(
        p.srs[4],
        Placement::Resident,
        "{}",
        p.explain(&shape, "32 GiB")
    );
}

#[test]
fn a_48_gb_card_keeps_h_resident_and_batches_the_witness_sections() {
    let shape = porep_32g();
    // A batch shares L's, A's and B's passes; H's bases would cross for every partition.
    let p = choose(&shape, 46 * GIB, 9, 1, PlanLimits::default()).unwrap();
    let text = p.explain(&shape, "32 GiB");
    assert_eq!(p.h_stage, HStage::Lean, "{text}");
    assert_eq!(p.srs[0], Placement::Resident, "{text}");
    assert!(
        p.streams_witness_sections() && p.batch == MAX_BATCH,
        "{text}"
    );
    // Resident, H's MSM takes passes larger than a streamed section's.
    assert!(p.h_chunk > MAX_STREAM_CHUNK, "{text}");
    assert!(p.streamed_bytes(&shape) < 4 * GIB, "{text}");
    // Where H and the matrices do not both fit beside the working buffers, H streams.
    let p30 = choose(&shape, 30 * GIB, 9, 1, PlanLimits::default()).unwrap();
    assert_eq!(p30.srs[0], Placement::Streamed);
    assert!(p30.matrices.iter().all(|&m| m == Placement::Resident));
}

#[test]
fn h_passes_compete_with_the_key_for_the_room() {
    let shape = porep_32g();
    // A 32 GB card with a batch: B in G2 streams (the batch shares its passes) so that H, which
    // streams for every partition, takes passes of 2^25 rather than 2^24.
    let p = choose(&shape, 30 * GIB, 9, 1, PlanLimits::default()).unwrap();
    let text = p.explain(&shape, "32 GiB");
    assert_eq!(p.srs[0], Placement::Streamed, "{text}");
    assert_eq!(p.h_chunk, 2 * MAX_STREAM_CHUNK, "{text}");
    assert_eq!(p.srs[4], Placement::Streamed, "{text}");
    assert!(
        p.matrices.iter().all(|&m| m == Placement::Resident),
        "{text}"
    );
    assert!(p.total() <= p.budget, "{text}");
    // Alone, a partition would pay all of B in G2's bytes: it keeps them and H's smaller passes.
    let alone = choose(&shape, 30 * GIB, 1, 1, PlanLimits::default()).unwrap();
    let text = alone.explain(&shape, "32 GiB");
    assert_eq!(alone.srs[4], Placement::Resident, "{text}");
    assert_eq!(alone.h_chunk, MAX_STREAM_CHUNK, "{text}");
}

#[test]
fn a_budget_below_the_streaming_plan_is_refused_with_the_minimum() {
    let shape = porep_32g();
    let min = minimum(&shape, PlanLimits::default());
    // Three domain vectors' worth and the witness, whatever streams.
    assert!((12.0..15.0).contains(&gib(min)), "{}", gib(min));
    let err = plan(&shape, 10.0).unwrap_err();
    assert_eq!(
        err,
        PlanError::TooSmall {
            budget: 10 * GIB,
            minimum: min
        }
    );
    assert!(
        err.to_string().contains(&format!("{:.2} GiB", gib(min))),
        "{err}"
    );
    // Exactly the minimum is enough.
    let p = choose(&shape, min, 2, 1, PlanLimits::default()).unwrap();
    assert!(p.total() <= min);
}

#[test]
fn the_phases_add_up() {
    let shape = porep_32g();
    let p = plan(&shape, 15.0).unwrap();
    let (w, v) = (shape.vars() as u64 * FR, shape.m as u64 * FR);
    // Lean: no phase holds three domain vectors and the witness.
    assert!(p.working() < w + 3 * v, "{}", gib(p.working()));
    assert!(p.phases.iter().any(|ph| ph.bytes >= w + 2 * v));
    let full = plan(&shape, 139.0).unwrap();
    assert!(full.working() >= 2 * w + 3 * v);
    assert_eq!(full.total(), full.resident + full.working());
}

#[test]
fn checks_can_force_streaming_at_small_shapes() {
    let shape = porep_2k();
    let resident = plan(&shape, 40.0).unwrap();
    assert!(!resident.streams());
    let limits = PlanLimits {
        max_chunk: Some(1 << 16),
        stream_all: true,
    };
    let forced = choose(&shape, 40 * GIB, 2, 1, limits).unwrap();
    assert_eq!(forced.h_stage, HStage::Lean);
    assert!(forced.srs.iter().all(|&s| s == Placement::Streamed));
    assert!(forced.matrices.iter().all(|&m| m == Placement::Streamed));
    assert_eq!(forced.chunk, 1 << 16);
    assert!(forced.passes(&shape) > 100);
    // A budget below the key's size streams part of it on its own.
    let small = plan(&shape, 0.9).unwrap();
    assert_eq!(small.h_stage, HStage::Lean);
    assert!(small.streams());
    assert!(small.total() <= small.budget);
}

#[test]
fn the_explanation_names_every_part() {
    let shape = porep_32g();
    let p = plan(&shape, 22.0).unwrap();
    let text = p.explain(&shape, "porep-c2 32GiB");
    for part in [
        "SRS H", "SRS L", "SRS A", "SRS B_G1", "SRS B_G2", "matrix A", "matrix C",
    ] {
        assert!(text.contains(part), "{text}");
    }
    assert!(text.contains("streamed per partition"), "{text}");
    assert!(
        p.summary().starts_with("lean H stage, streaming"),
        "{}",
        p.summary()
    );
}

#[test]
fn partitions_share_streamed_passes_where_the_budget_has_room() {
    let shape = porep_32g();
    for budget in [15, 22, 30] {
        let alone = choose(&shape, budget * GIB, 1, 1, PlanLimits::default()).unwrap();
        for workers in [2, 3, 5] {
            let p = choose(&shape, budget * GIB, workers, 1, PlanLimits::default()).unwrap();
            let text = p.explain(&shape, "32 GiB");
            assert_eq!(
                p.batch,
                batch_limit(workers),
                "{budget} GiB, {workers} workers: {text}"
            );
            assert!(p.streams_witness_sections(), "{text}");
            assert!(p.total() <= p.budget, "{text}");
            // The batch's witnesses are made a window at a time in buffers they share: its
            // MSM phase takes no more room than a lone partition's, which expands its witness
            // whole ...
            let msm_phase = |p: &Plan| p.phases.last().expect("phases").bytes;
            assert!(msm_phase(&p) <= msm_phase(&alone), "{text}");
            // ... and a partition's share of the streamed key is smaller.
            assert!(
                p.streamed_bytes(&shape) < alone.streamed_bytes(&shape),
                "{text}"
            );
            assert!(p.cost(&shape) < alone.cost(&shape), "{text}");
            assert!(
                text.contains(&format!("up to {} partitions", p.batch)),
                "{text}"
            );
        }
    }
    // Three workers or more keep one out of the batch, ready for the turn it ends.
    assert_eq!(
        [0, 1, 2, 3, 5, 20].map(batch_limit),
        [1, 1, 2, 2, 4, MAX_BATCH]
    );
    // A key kept whole batches nothing.
    for budget in [75, 139] {
        assert_eq!(
            choose(&shape, budget * GIB, 4, 1, PlanLimits::default())
                .unwrap()
                .batch,
            1
        );
    }
    // Batching never raises the smallest budget: two witnesses take less room than the H
    // stage's three domain vectors.
    let min = minimum(&shape, PlanLimits::default());
    let at_min = choose(&shape, min, 4, 1, PlanLimits::default()).unwrap();
    assert!(at_min.total() <= min && at_min.batch >= 2);
}

#[test]
fn a_second_partition_runs_at_once_only_where_it_fits_and_has_gaps_to_fill() {
    let small = porep_2k();
    let one = choose(&small, 30 * GIB, 2, 1, PlanLimits::default()).unwrap();
    let two = choose(&small, 30 * GIB, 2, 2, PlanLimits::default()).unwrap();
    assert_eq!((one.lanes, two.lanes), (1, 2));
    // The same passes, and the second lane's vectors, twiddles and scratch on top.
    assert_eq!((two.chunk, two.h_chunk), (one.chunk, one.h_chunk));
    assert!(two.working() > one.working());
    assert!(
        two.summary().contains("2 partitions at once"),
        "{}",
        two.summary()
    );
    // Never more lanes than workers, whatever is asked.
    assert_eq!(
        choose(&small, 30 * GIB, 1, 4, PlanLimits::default())
            .unwrap()
            .lanes,
        1
    );
    // Where the second lane's buffers do not fit beside the key, one lane: the budget just
    // below the two-lane plan's total.
    let tight = two.total() - 1;
    let p = choose(&small, tight, 2, 2, PlanLimits::default()).unwrap();
    assert_eq!((p.lanes, p.chunk), (1, one.chunk));
    assert!(p.total() <= tight);
    // Lean and batched plans prove one partition at a time, and so does a whole H200's full
    // plan of a 32 GiB partition, whose MSMs leave few gaps, though a second lane would fit.
    for budget in [15, 22, 138] {
        let p = choose(&porep_32g(), budget * GIB, 2, 2, PlanLimits::default()).unwrap();
        assert_eq!(p.lanes, 1, "{budget} GiB");
    }
    let full = choose(&porep_32g(), 138 * GIB, 2, 1, PlanLimits::default()).unwrap();
    let two = build(
        &porep_32g(),
        full.budget,
        full.h_stage,
        (full.chunk, full.h_chunk),
        [true; 8],
        1,
        2,
    );
    assert!(
        two.total() <= two.budget,
        "a second lane fits: {:.1} GiB",
        gib(two.total())
    );
}
