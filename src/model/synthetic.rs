//! Random weights of a named shape from our own seeded generator, built in memory.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};

use super::config::{ArchConfig, TensorSpec};
use crate::util::{fnv1a, SplitMix64};

/// The values of one tensor: uniform in ±1/√fan_in (so activations stay in range), norms at their neutral gain.
/// Seeded per tensor name, so the weights do not depend on generation order.
pub fn tensor_values(spec: &TensorSpec, seed: u64) -> Vec<f32> {
    let n = spec.numel();
    if spec.is_norm {
        return vec![spec.norm_init; n];
    }
    let scale = if spec.name.ends_with(".bias") {
        0.02
    } else {
        1.0 / (spec.fan_in as f32).sqrt()
    };
    let mut rng = SplitMix64::new(seed ^ fnv1a(spec.name.as_bytes()));
    (0..n).map(|_| rng.next_signed_unit() * scale).collect()
}

/// Builds every tensor of the architecture on `device` in `dtype`, reporting bytes done.
pub fn build_tensors(
    cfg: &ArchConfig,
    seed: u64,
    dtype: DType,
    device: &Device,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> candle_core::Result<HashMap<String, Tensor>> {
    let specs = cfg.tensor_specs();
    let total: u64 = specs
        .iter()
        .map(|s| (s.numel() * dtype.size_in_bytes()) as u64)
        .sum();
    let mut done = 0u64;
    let mut out = HashMap::with_capacity(specs.len());
    for spec in &specs {
        let values = tensor_values(spec, seed);
        let t = Tensor::from_vec(values, spec.shape.as_slice(), &Device::Cpu)?
            .to_dtype(dtype)?
            .to_device(device)?;
        done += (spec.numel() * dtype.size_in_bytes()) as u64;
        progress(&spec.name, done, total);
        out.insert(spec.name.clone(), t);
    }
    Ok(out)
}
