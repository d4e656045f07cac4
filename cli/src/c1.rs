//! `cuzk submit --c1`: a `porep-c2` job from a C1 file as an operator has it (lotus/Curio
//! wrapper, filecoin-proofs-api JSON or filecoin-proofs JSON; `cuzk_circuits::porep_c1`). The
//! file goes to the cluster as it is — the synth node detects its form too — and what it says
//! about itself is checked against the flags here, before anything is uploaded.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context as _};
use cuzk_circuits::porep::{SectorSize, MAX_C1_BYTES};
use cuzk_circuits::porep_c1;

/// Reads a C1 file, refusing one larger than any C1 output.
pub fn read_c1_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    let file = std::fs::File::open(path).with_context(|| format!("--c1 {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_C1_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() > MAX_C1_BYTES {
        bail!(
            "{} is over {MAX_C1_BYTES} bytes: not a C1 output",
            path.display()
        );
    }
    Ok(bytes)
}

/// What `cuzk submit --c1` was told about the C1 file.
#[derive(Debug, Default)]
pub struct C1Flags<'a> {
    pub sector: Option<u64>,
    pub miner: &'a str,
    pub sector_size: Option<SectorSize>,
    /// filecoin-proofs-api's proof name, for a file in filecoin-proofs' own form.
    pub seal_proof: Option<&'a str>,
}

/// The job parameters for proving `c1`: the sector from `--sector` or the lotus file's
/// `SectorNum`, the size from the proof the file (or `--seal-proof`) names or `--sector-size`,
/// the miner as its actor id.
pub fn porep_params(c1: &[u8], flags: &C1Flags<'_>) -> anyhow::Result<serde_json::Value> {
    let C1Flags {
        sector,
        miner,
        sector_size,
        seal_proof,
    } = *flags;
    // The cheap check first: a bad miner is refused before the C1 file is parsed.
    let miner = porep_c1::parse_miner(miner)?;
    let detected = porep_c1::detect(c1).map_err(anyhow::Error::msg)?;
    let flagged = seal_proof
        .map(porep_c1::SealProof::from_api_name)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let proof = match (flagged, detected.proof) {
        (Some(flag), Some(file)) if flag != file => bail!(
            "--seal-proof {}, but the C1 file is a {} proof",
            flag.api_name(),
            file.api_name()
        ),
        (flag, file) => file.or(flag),
    };
    let sector_id = match (sector, detected.sector_number) {
        (Some(flag), Some(file)) if flag != file => {
            bail!("--sector {flag}, but the C1 file is for sector {file}")
        }
        (Some(id), _) | (None, Some(id)) => id,
        (None, None) => bail!("give --sector: this C1 file does not name its sector"),
    };
    let size = match (sector_size, proof) {
        (Some(flag), Some(proof)) if flag != proof.size => bail!(
            "--sector-size {}, but the C1 file is a {} proof",
            flag.name(),
            proof.api_name()
        ),
        (_, Some(proof)) => proof.size,
        (Some(size), None) => size,
        (None, None) => bail!(
            "give --sector-size: a C1 output in filecoin-proofs' own form does not name its size"
        ),
    };
    let mut params = serde_json::json!({
        "sector_size": size.name(),
        "sector_id": sector_id,
        "miner": miner,
    });
    // Only a file that does not name its proof needs the job to.
    if let (Some(proof), None) = (flagged, detected.proof) {
        params["proof"] = proof.api_name().into();
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn flags_and_file_must_agree() {
        let api = br#"{"registered_proof":"StackedDrg2KiBV1_1","vanilla_proofs":{}}"#;
        let b64 = base64::engine::general_purpose::STANDARD.encode(api);
        let lotus = format!(r#"{{"SectorNum":9,"Phase1Out":"{b64}","SectorSize":2048}}"#);
        let flags = |sector, sector_size, seal_proof| C1Flags {
            sector,
            miner: "t01234",
            sector_size,
            seal_proof,
        };
        let params = porep_params(lotus.as_bytes(), &flags(None, None, None)).unwrap();
        assert_eq!(
            params,
            serde_json::json!({"sector_size": "2KiB", "sector_id": 9, "miner": 1234})
        );
        let e = porep_params(lotus.as_bytes(), &flags(Some(8), None, None)).unwrap_err();
        assert!(e.to_string().contains("for sector 9"), "{e}");
        let e = porep_params(
            lotus.as_bytes(),
            &flags(None, Some(SectorSize::S8MiB), None),
        )
        .unwrap_err();
        assert!(e.to_string().contains("StackedDrg2KiBV1_1"), "{e}");
        let synthetic = Some("StackedDrg2KiBV1_1_Feat_SyntheticPoRep");
        let e = porep_params(lotus.as_bytes(), &flags(None, None, synthetic)).unwrap_err();
        assert!(e.to_string().contains("--seal-proof"), "{e}");
        let e = porep_params(
            lotus.as_bytes(),
            &C1Flags {
                miner: "t3abc",
                ..flags(None, None, None)
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("ID address"), "{e}");

        let own = br#"{"vanilla_proofs":[[]]}"#;
        let e = porep_params(own, &flags(Some(1), None, None)).unwrap_err();
        assert!(e.to_string().contains("--sector-size"), "{e}");
        let e = porep_params(own, &flags(None, Some(SectorSize::S2KiB), None)).unwrap_err();
        assert!(e.to_string().contains("--sector"), "{e}");
        let params = porep_params(own, &flags(Some(1), Some(SectorSize::S32GiB), None)).unwrap();
        assert_eq!(params["sector_size"], "32GiB");
        assert!(params.get("proof").is_none());
        let params = porep_params(own, &flags(Some(1), None, synthetic)).unwrap();
        assert_eq!(params["sector_size"], "2KiB");
        assert_eq!(params["proof"], "StackedDrg2KiBV1_1_Feat_SyntheticPoRep");
    }
}
