use super::*;
use base64::Engine;

const API: &[u8] = br#"{"registered_proof":"StackedDrg2KiBV1_1","vanilla_proofs":{}}"#;

fn lotus(sector: u64) -> Bytes {
    let b64 = base64::engine::general_purpose::STANDARD.encode(API);
    format!(r#"{{"SectorNum":{sector},"Phase1Out":"{b64}","SectorSize":2048}}"#).into()
}

fn porep(c1: Bytes) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: "porep-1234-7".into(),
        proof_kind: ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: 5,
        vanilla_proof: c1,
        sector_number: 7,
        miner_id: 1234,
        ..Default::default()
    }
}

#[test]
fn a_curio_porep_request_becomes_a_porep_c2_job() {
    let (spec, input) = job_for(porep(lotus(7)), None).unwrap();
    assert_eq!(spec.circuit, "porep-c2");
    assert_eq!(
        spec.params,
        serde_json::json!({"sector_size": "2KiB", "sector_id": 7, "miner": 1234})
    );
    assert_eq!(input, lotus(7));
    assert!(
        spec.job_id.starts_with("gw-porep-1234-7-"),
        "{}",
        spec.job_id
    );
    assert!(valid_job_id(&spec.job_id));
    // A retried request names the same job; another client's, or another request id, not.
    assert_eq!(
        job_for(porep(lotus(7)), None).unwrap().0.job_id,
        spec.job_id
    );
    let curio = job_for(porep(lotus(7)), Some("curio")).unwrap().0.job_id;
    assert_eq!(
        job_for(porep(lotus(7)), Some("curio")).unwrap().0.job_id,
        curio
    );
    assert_ne!(curio, spec.job_id);
    assert!(owned_by(&curio, "curio") && !owned_by(&curio, "other"));
    assert!(!owned_by(&spec.job_id, "curio"));
    assert!(owned_by(&attempt_id(&curio, 3), "curio"));
    let mut other = porep(lotus(7));
    other.request_id = "porep-1234-8".into();
    assert_ne!(job_for(other, None).unwrap().0.job_id, spec.job_id);
    // filecoin-proofs' own form names no proof: the job does.
    let (spec, _) = job_for(
        porep(Bytes::from_static(br#"{"vanilla_proofs":[[]]}"#)),
        None,
    )
    .unwrap();
    assert_eq!(spec.params["proof"], "StackedDrg2KiBV1_1");
    // Long or odd request ids still give a valid id.
    let mut odd = porep(lotus(7));
    odd.request_id = "ü/".repeat(64);
    let long_owner = "n".repeat(64);
    let id = job_for(odd.clone(), Some(&long_owner)).unwrap().0.job_id;
    assert!(valid_job_id(&attempt_id(&id, MAX_ATTEMPTS - 1)), "{id}");
    // A request id is bounded before anything is made of it, and only a prefix is echoed.
    odd.request_id = "x".repeat(48 << 20);
    match job_for(odd, None) {
        Err(RequestError::Invalid(m)) => {
            assert!(m.len() < 120 && m.contains("50331648 bytes"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_requests_are_refused_with_the_reason() {
    let invalid = |request: SubmitProofRequest, expected: &str| match job_for(request, None) {
        Err(RequestError::Invalid(m)) => assert!(m.contains(expected), "{m}"),
        other => panic!("expected INVALID_ARGUMENT ({expected}), got {other:?}"),
    };
    invalid(
        porep(Bytes::from_static(b"\x00not json")),
        "not a C1 output",
    );
    invalid(porep(Bytes::new()), "empty");
    invalid(porep(lotus(8)), "for sector 8");
    invalid(
        SubmitProofRequest {
            registered_proof: 8,
            ..porep(lotus(7))
        },
        "StackedDrg32GiBV1_1",
    );
    invalid(
        SubmitProofRequest {
            registered_proof: 99,
            ..porep(lotus(7))
        },
        "99",
    );
    invalid(
        SubmitProofRequest {
            sector_size: 4096,
            ..porep(lotus(7))
        },
        "sector_size 4096",
    );
    invalid(
        SubmitProofRequest {
            proof_kind: 0,
            ..porep(lotus(7))
        },
        "proof_kind",
    );
}

#[test]
fn kinds_the_cluster_lacks_are_unimplemented() {
    match job_for(
        SubmitProofRequest {
            proof_kind: 42,
            ..porep(lotus(7))
        },
        None,
    ) {
        Err(RequestError::Unimplemented(m)) => {
            assert!(m.contains("42") && m.contains("SNAP_DEALS_UPDATE"), "{m}")
        }
        other => panic!("42: {other:?}"),
    }
}

fn window(proofs: usize) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: "wdpost-1234-3".into(),
        proof_kind: ProofKind::WindowPostPartition as i32,
        registered_proof: 10,
        vanilla_proofs: vec![Bytes::from_static(&[1, 2, 3]); proofs],
        miner_id: 1234,
        randomness: vec![0x2a; 32].into(),
        partition_index: 3,
        ..Default::default()
    }
}

#[test]
fn curio_post_requests_become_post_jobs() {
    let (spec, input) = job_for(window(2), None).unwrap();
    assert_eq!(spec.circuit, "window-post");
    assert_eq!(
        spec.params,
        serde_json::json!({"sector_size": "2KiB", "proof": "StackedDrgWindow2KiBV1_2",
            "miner": 1234, "randomness": "2a".repeat(32), "partition_index": 3})
    );
    let input: serde_json::Value = serde_json::from_slice(&input).unwrap();
    assert_eq!(
        input,
        serde_json::json!({"vanilla_proofs": ["AQID", "AQID"]})
    );
    // The job's parameters are what the family takes.
    cuzk_circuits::resolve(&spec.circuit, &spec.params).unwrap();
    let winning = SubmitProofRequest {
        proof_kind: ProofKind::WinningPost as i32,
        registered_proof: 3,
        sector_size: 32 << 30,
        partition_index: 0,
        ..window(1)
    };
    let (spec, _) = job_for(winning, None).unwrap();
    assert_eq!(spec.circuit, "winning-post");
    assert_eq!(spec.params["proof"], "StackedDrgWinning32GiBV1");
    assert!(spec.params.get("partition_index").is_none());
}

#[test]
fn priorities_follow_curio_and_the_proof_kind() {
    let with = |request: SubmitProofRequest, priority: proto::Priority| {
        let mut request = request;
        request.set_priority(priority);
        job_for(request, None).unwrap().0.priority
    };
    let winning = SubmitProofRequest {
        proof_kind: ProofKind::WinningPost as i32,
        registered_proof: 0,
        partition_index: 0,
        ..window(1)
    };
    use proto::Priority as Curio;
    for post in [window(1), winning] {
        assert_eq!(with(post.clone(), Curio::Unspecified), Priority::High);
        assert_eq!(with(post.clone(), Curio::Critical), Priority::High);
        assert_eq!(with(post.clone(), Curio::Normal), Priority::Normal);
        assert_eq!(with(post, Curio::Low), Priority::Normal);
    }
    assert_eq!(with(porep(lotus(7)), Curio::Unspecified), Priority::Normal);
    assert_eq!(with(porep(lotus(7)), Curio::High), Priority::High);
    assert_eq!(with(porep(lotus(7)), Curio::Low), Priority::Normal);
}

#[test]
fn bad_post_requests_are_refused_with_the_reason() {
    let invalid = |request: SubmitProofRequest, expected: &str| match job_for(request, None) {
        Err(RequestError::Invalid(m)) => assert!(m.contains(expected), "{m}"),
        other => panic!("expected INVALID_ARGUMENT ({expected}), got {other:?}"),
    };
    invalid(window(0), "vanilla_proofs is empty");
    invalid(
        window(3),
        "3 vanilla proofs; StackedDrgWindow2KiBV1_2 takes at most 2",
    );
    invalid(
        SubmitProofRequest {
            randomness: vec![1; 31].into(),
            ..window(1)
        },
        "randomness has 31 bytes",
    );
    invalid(
        SubmitProofRequest {
            registered_proof: 0,
            ..window(1)
        },
        "StackedDrgWinning2KiBV1, not a window-post proof",
    );
    invalid(
        SubmitProofRequest {
            registered_proof: 15,
            ..window(1)
        },
        "15",
    );
    invalid(
        SubmitProofRequest {
            sector_size: 8 << 20,
            ..window(1)
        },
        "sector_size 8388608",
    );
    invalid(
        SubmitProofRequest {
            proof_kind: ProofKind::WinningPost as i32,
            registered_proof: 0,
            ..window(1)
        },
        "partition_index 3",
    );
}

/// What Curio's snap prove task sends (`lib/ffi` in Curio): Curio's default priority.
fn snap(proofs: usize) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: "ps-snap-1234-9-77".into(),
        proof_kind: ProofKind::SnapDealsUpdate as i32,
        registered_proof: 0,
        priority: proto::Priority::Normal as i32,
        vanilla_proofs: vec![Bytes::from_static(&[1, 2, 3]); proofs],
        sector_number: 9,
        miner_id: 1234,
        comm_r_old: vec![1; 32].into(),
        comm_r_new: vec![2; 32].into(),
        comm_d_new: vec![3; 32].into(),
        ..Default::default()
    }
}

#[test]
fn a_curio_snap_request_becomes_a_snap_deals_job() {
    let (spec, input) = job_for(snap(1), None).unwrap();
    assert_eq!(spec.circuit, "snap-deals");
    assert_eq!(spec.priority, Priority::Normal);
    assert_eq!(
        spec.params,
        serde_json::json!({"sector_size": "2KiB", "comm_r_old": "01".repeat(32),
            "comm_r_new": "02".repeat(32), "comm_d_new": "03".repeat(32)})
    );
    let input: serde_json::Value = serde_json::from_slice(&input).unwrap();
    assert_eq!(input, serde_json::json!({"vanilla_proofs": ["AQID"]}));
    cuzk_circuits::resolve(&spec.circuit, &spec.params).unwrap();
    let big = SubmitProofRequest {
        registered_proof: 3,
        sector_size: 32 << 30,
        priority: 0,
        ..snap(16)
    };
    let (spec, _) = job_for(big, None).unwrap();
    assert_eq!(spec.params["sector_size"], "32GiB");
    assert_eq!(spec.priority, Priority::Normal);
}

#[test]
fn bad_snap_requests_are_refused_with_the_reason() {
    let invalid = |request: SubmitProofRequest, expected: &str| match job_for(request, None) {
        Err(RequestError::Invalid(m)) => assert!(m.contains(expected), "{m}"),
        other => panic!("expected INVALID_ARGUMENT ({expected}), got {other:?}"),
    };
    invalid(snap(0), "0 vanilla proofs; StackedDrg2KiBV1 takes 1");
    invalid(snap(2), "2 vanilla proofs; StackedDrg2KiBV1 takes 1");
    invalid(
        SubmitProofRequest {
            registered_proof: 5,
            ..snap(1)
        },
        "registered update proof 5 is unknown",
    );
    invalid(
        SubmitProofRequest {
            sector_size: 4096,
            ..snap(1)
        },
        "sector_size 4096",
    );
    invalid(
        SubmitProofRequest {
            comm_r_old: vec![1; 31].into(),
            ..snap(1)
        },
        "comm_r_old has 31 bytes",
    );
    invalid(
        SubmitProofRequest {
            comm_d_new: Bytes::new(),
            ..snap(1)
        },
        "comm_d_new has 0 bytes",
    );
    invalid(
        SubmitProofRequest {
            comm_r_new: vec![0xff; 32].into(),
            ..snap(1)
        },
        "'comm_r_new'",
    );
}
