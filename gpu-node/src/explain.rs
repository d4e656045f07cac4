//! `cuzk gpu-node --explain-plan`: the device memory plan each preloaded shape gets within the
//! budget, from its parameters and matrices alone — no GPU is needed when the budget is given.

use cuzk_circuits::{CircuitSpec, ShapeCache};
use cuzk_common::config::{GpuConfig, ParamConfig};
use cuzk_kernels::plan::{self, PlanLimits, PlanShape};

/// The plans' tables, and whether every shape got one (a budget too small for a shape names
/// the smallest that would do).
pub fn explain_plans(config: &GpuConfig, params: &ParamConfig) -> anyhow::Result<(String, bool)> {
    if config.preload.is_empty() {
        anyhow::bail!("name the shapes to plan with --gpu-preload");
    }
    let workers = config.workers(true);
    let budget = match config.memory_budget {
        Some(b) => b,
        None if cuzk_kernels::cuda_available() => {
            cuzk_kernels::CudaBackend::new(0, None, workers)?.key_budget()
        }
        None => anyhow::bail!(
            "no GPU here to read the memory of: give the budget to plan for with --gpu-memory-budget"
        ),
    };
    let shapes = crate::backend::shape_cache(config, params)?;
    let (mut out, mut all) = (String::new(), true);
    for spec in &config.preload {
        let spec: CircuitSpec = serde_json::from_value(spec.clone())?;
        let family = spec.family()?;
        let name = family.shape_key();
        let pk = ShapeCache::proving_key(&shapes, &*family)?;
        let shape = PlanShape::of(&pk);
        match plan::choose(&shape, budget, workers, config.lanes, PlanLimits::default()) {
            Ok(p) => out.push_str(&p.explain(&shape, &name)),
            Err(e) => {
                all = false;
                out.push_str(&format!("{name}: refused: {e}\n"));
            }
        }
        out.push('\n');
    }
    Ok((out, all))
}
