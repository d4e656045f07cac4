//! `PreloadSRS` / `EvictSRS`: Curio's `circuit_id` as a circuit the GPU nodes can resolve, and
//! the nodes' answers folded into Curio's replies. Accepted ids:
//! - Curio's own (`extern/cuzk` in Curio): `porep-32g`, `porep-64g`, `snap-32g`, `snap-64g`,
//!   `wpost-32g`, `wpost-64g`, `winning-32g`, `winning-64g`;
//! - our shape keys, `porep-c2-<size>`, `snap-deals-<size>`, `window-post-<size>`,
//!   `winning-post-<size>` (`2KiB`, `8MiB`, `512MiB`, `32GiB`, `64GiB`);
//! - a circuit as a job names it, as JSON: `{"circuit": "mimc", "params": {"rounds": 64, "partitions": 1}}`.

use cuzk_wire::control::SrsReply;
use serde_json::json;
use tonic::Status;

use crate::proto::{EvictSrsResponse, PreloadSrsResponse};
use cuzk_wire::excerpt;

const SIZES: &[&str] = &["2KiB", "8MiB", "512MiB", "32GiB", "64GiB"];

/// Longest `circuit_id` taken: the JSON form of a circuit is some hundred bytes.
pub const MAX_CIRCUIT_ID_BYTES: usize = 1024;

/// The circuit `circuit` (`porep-c2`, `snap-deals`, `window-post`, `winning-post`) for sectors
/// of `size`. A shape depends on neither the sector, the prover, the randomness, the
/// commitments nor the partition.
fn shape(circuit: &str, size: &str) -> (String, serde_json::Value) {
    let zeros = "00".repeat(32);
    let params = match circuit {
        "porep-c2" => json!({"sector_size": size, "sector_id": 0, "prover_id": zeros}),
        "snap-deals" => {
            // Commitments must be nonzero field elements; any such will do.
            let one = "01".repeat(32);
            json!({"sector_size": size, "comm_r_old": one, "comm_r_new": one, "comm_d_new": one})
        }
        "window-post" => {
            json!({"sector_size": size, "randomness": zeros, "prover_id": zeros, "partition_index": 0})
        }
        _ => json!({"sector_size": size, "randomness": zeros, "prover_id": zeros}),
    };
    (circuit.to_owned(), params)
}

/// Curio's ids: `<kind>-<32g|64g>`.
fn curio_id(circuit_id: &str) -> Option<(String, serde_json::Value)> {
    let (kind, size) = circuit_id.rsplit_once('-')?;
    let size = match size {
        "32g" => "32GiB",
        "64g" => "64GiB",
        _ => return None,
    };
    let circuit = match kind {
        "porep" => "porep-c2",
        "snap" => "snap-deals",
        "wpost" => "window-post",
        "winning" => "winning-post",
        _ => return None,
    };
    Some(shape(circuit, size))
}

/// The circuit name and parameters `circuit_id` stands for.
pub fn circuit_for(circuit_id: &str) -> Result<(String, serde_json::Value), Status> {
    if circuit_id.len() > MAX_CIRCUIT_ID_BYTES {
        return Err(Status::invalid_argument(format!(
            "circuit_id {} is over {MAX_CIRCUIT_ID_BYTES} bytes",
            excerpt(circuit_id)
        )));
    }
    if let Some(found) = curio_id(circuit_id) {
        return Ok(found);
    }
    for circuit in ["porep-c2", "snap-deals", "window-post", "winning-post"] {
        let size = circuit_id
            .strip_prefix(circuit)
            .and_then(|rest| rest.strip_prefix('-'));
        if let Some(size) = size.filter(|s| SIZES.contains(s)) {
            return Ok(shape(circuit, size));
        }
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Named {
        circuit: String,
        #[serde(default)]
        params: serde_json::Value,
    }
    let invalid = |why: String| {
        Status::invalid_argument(format!(
            "circuit_id {}: {why}; accepted: porep-32g, porep-64g, snap-32g, snap-64g, wpost-32g, wpost-64g, winning-32g, winning-64g, <porep-c2|snap-deals|window-post|winning-post>-<2KiB|8MiB|512MiB|32GiB|64GiB>, or {{\"circuit\": ..., \"params\": {{...}}}}",
            excerpt(circuit_id)
        ))
    };
    let named: Named = serde_json::from_str(circuit_id).map_err(|_| invalid("unknown".into()))?;
    let spec = cuzk_circuits::CircuitSpec {
        name: named.circuit,
        params: named.params,
    };
    spec.family().map_err(|e| invalid(e.to_string()))?;
    Ok((spec.name, spec.params))
}

/// The nodes' errors, one line each, if any node failed.
fn failures(replies: &[SrsReply]) -> Result<(), Status> {
    if replies.is_empty() {
        return Err(Status::unavailable("no GPU node answered"));
    }
    let failed: Vec<String> = replies
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.node)))
        .collect();
    match failed.is_empty() {
        true => Ok(()),
        false => Err(Status::failed_precondition(failed.join("; "))),
    }
}

/// `already_loaded` when every node had the key; `load_ms` the slowest node's.
pub fn preload_response(replies: &[SrsReply]) -> Result<PreloadSrsResponse, Status> {
    failures(replies)?;
    Ok(PreloadSrsResponse {
        already_loaded: replies.iter().all(|r| r.was_loaded),
        load_time_ms: replies.iter().map(|r| r.load_ms).max().unwrap_or(0),
    })
}

/// `was_loaded` when any node had the key; `freed_bytes` summed over nodes.
pub fn evict_response(replies: &[SrsReply]) -> Result<EvictSrsResponse, Status> {
    failures(replies)?;
    Ok(EvictSrsResponse {
        was_loaded: replies.iter().any(|r| r.was_loaded),
        freed_bytes: replies.iter().map(|r| r.freed_bytes).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circuit_ids_map_to_circuits() {
        let (name, params) = circuit_for("porep-32g").unwrap();
        assert_eq!(
            (name.as_str(), &params["sector_size"]),
            ("porep-c2", &json!("32GiB"))
        );
        assert_eq!(
            circuit_for("porep-c2-2KiB").unwrap().1["sector_size"],
            "2KiB"
        );
        let mimc =
            circuit_for(r#"{"circuit":"mimc","params":{"rounds":64,"partitions":1}}"#).unwrap();
        assert_eq!(mimc.0, "mimc");
        for bad in [
            "porep-16g",
            "wpost-2g",
            "porep-c2-1KiB",
            "window-post-1KiB",
            "window-post2KiB",
            r#"{"circuit":"groth-bogus"}"#,
            "",
            "p".repeat(48 << 20).as_str(),
        ] {
            assert_eq!(
                circuit_for(bad).unwrap_err().code(),
                tonic::Code::InvalidArgument
            );
        }
    }

    /// Curio's PoSt and SnapDeals ids and our shape keys name those circuits, with parameters
    /// the families take (the GPU nodes resolve them as they would a job's).
    #[cfg(feature = "porep")]
    #[test]
    fn post_and_snap_ids_map_to_their_circuits() {
        for (id, circuit, size) in [
            ("wpost-32g", "window-post", "32GiB"),
            ("wpost-64g", "window-post", "64GiB"),
            ("winning-32g", "winning-post", "32GiB"),
            ("winning-64g", "winning-post", "64GiB"),
            ("window-post-2KiB", "window-post", "2KiB"),
            ("snap-32g", "snap-deals", "32GiB"),
            ("snap-64g", "snap-deals", "64GiB"),
            ("snap-deals-2KiB", "snap-deals", "2KiB"),
            ("winning-post-8MiB", "winning-post", "8MiB"),
        ] {
            let (name, params) = circuit_for(id).unwrap();
            assert_eq!(
                (name.as_str(), &params["sector_size"]),
                (circuit, &json!(size))
            );
            let spec = cuzk_circuits::CircuitSpec { name, params };
            let resolved = spec.family();
            assert!(resolved.is_ok(), "{id}: {:?}", resolved.err());
        }
    }

    #[test]
    fn node_answers_fold_into_one_reply() {
        let node = |name: &str, was_loaded, load_ms, freed_bytes| SrsReply {
            node: name.into(),
            shape: "s".into(),
            was_loaded,
            load_ms,
            freed_bytes,
            error: None,
        };
        let replies = [node("a", true, 5, 10), node("b", false, 9, 0)];
        let preload = preload_response(&replies).unwrap();
        assert_eq!((preload.already_loaded, preload.load_time_ms), (false, 9));
        let evict = evict_response(&replies).unwrap();
        assert_eq!((evict.was_loaded, evict.freed_bytes), (true, 10));
        let mut refused = node("c", false, 0, 0);
        refused.error = Some("no parameters".into());
        let err = preload_response(&[replies[0].clone(), refused]).unwrap_err();
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert!(
            err.message().contains("c: no parameters"),
            "{}",
            err.message()
        );
        assert_eq!(
            evict_response(&[]).unwrap_err().code(),
            tonic::Code::Unavailable
        );
    }
}
