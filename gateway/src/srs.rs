//! `PreloadSRS` / `EvictSRS`: Curio's `circuit_id` as a circuit the GPU nodes can resolve, and
//! the nodes' answers folded into Curio's replies. Accepted ids:
//! - Curio's own (`extern/cuzk` in Curio): `porep-32g`, `porep-64g`, `snap-32g`, `snap-64g`;
//!   its `wpost-32g`, `winning-32g` name kinds this cluster does not prove yet;
//! - our PoRep shape keys, `porep-c2-<size>` (`2KiB`, `8MiB`, `512MiB`, `32GiB`, `64GiB`);
//! - a circuit as a job names it, as JSON: `{"circuit": "mimc", "params": {"rounds": 64, "partitions": 1}}`.

use cuzk_wire::control::SrsReply;
use serde_json::json;
use tonic::Status;

use crate::proto::{EvictSrsResponse, PreloadSrsResponse};

const CURIO_UNSUPPORTED: &[&str] = &["wpost-32g", "winning-32g"];
const POREP_SIZES: &[&str] = &["2KiB", "8MiB", "512MiB", "32GiB", "64GiB"];

/// The circuit name and parameters `circuit_id` stands for.
pub fn circuit_for(circuit_id: &str) -> Result<(String, serde_json::Value), Status> {
    let porep = |size: &str| {
        // The shape does not depend on the sector or the prover.
        let params = json!({"sector_size": size, "sector_id": 0, "prover_id": "00".repeat(32)});
        Ok(("porep-c2".to_owned(), params))
    };
    let snap = |size: &str| {
        // The shape depends on the sector size alone; any commitments do.
        let one = "01".repeat(32);
        let params =
            json!({"sector_size": size, "comm_r_old": one, "comm_r_new": one, "comm_d_new": one});
        Ok(("snap-deals".to_owned(), params))
    };
    match circuit_id {
        "porep-32g" => return porep("32GiB"),
        "porep-64g" => return porep("64GiB"),
        "snap-32g" => return snap("32GiB"),
        "snap-64g" => return snap("64GiB"),
        id if CURIO_UNSUPPORTED.contains(&id) => {
            return Err(Status::unimplemented(format!(
                "{id}: this cluster proves POREP_SEAL_COMMIT only"
            )))
        }
        _ => {}
    }
    if let Some(size) = circuit_id.strip_prefix("porep-c2-") {
        if POREP_SIZES.contains(&size) {
            return porep(size);
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
            "circuit_id {circuit_id:?}: {why}; accepted: porep-32g, porep-64g, snap-32g, snap-64g, porep-c2-<2KiB|8MiB|512MiB|32GiB|64GiB>, or {{\"circuit\": ..., \"params\": {{...}}}}"
        ))
    };
    let named: Named = serde_json::from_str(circuit_id).map_err(|_| invalid("unknown".into()))?;
    let spec = cuzk_circuits::CircuitSpec {
        name: named.circuit,
        params: named.params,
    };
    cuzk_circuits::resolve(&spec).map_err(|e| invalid(e.to_string()))?;
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
        let (name, params) = circuit_for("snap-64g").unwrap();
        assert_eq!(
            (name.as_str(), &params["sector_size"]),
            ("snap-deals", &json!("64GiB"))
        );
        let spec = cuzk_circuits::CircuitSpec { name, params };
        assert_eq!(
            cuzk_circuits::resolve(&spec).unwrap().shape_key(),
            "snap-deals-64GiB"
        );
        assert_eq!(
            circuit_for("wpost-32g").unwrap_err().code(),
            tonic::Code::Unimplemented
        );
        for bad in [
            "porep-16g",
            "porep-c2-1KiB",
            r#"{"circuit":"groth-bogus"}"#,
            "",
        ] {
            assert_eq!(
                circuit_for(bad).unwrap_err().code(),
                tonic::Code::InvalidArgument
            );
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
