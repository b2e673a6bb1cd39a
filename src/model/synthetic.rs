//! Random weights of a named shape from our own seeded generator, built in memory.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};

use super::config::{ArchConfig, TensorSpec};
use crate::util::{fnv1a, SplitMix64};

/// The values of one tensor: uniform in ±1/√fan_in (so activations stay in range), norms at their neutral gain.
/// Seeded per tensor name, so the weights do not depend on generation order.
pub fn tensor_values(spec: &TensorSpec, seed: u64) -> Vec<f32> {
    tensor_values_until(spec, seed, &mut |_| true).unwrap_or_default()
}

/// Values made between two looks at `go_on` (given the values made so far).
const VALUES_PER_LOOK: usize = 1 << 22;

/// `tensor_values`, asking `go_on` every `VALUES_PER_LOOK` values whether to go on (`None`
/// when it said not to): an embedding of a hundred million values takes a second to make.
fn tensor_values_until(
    spec: &TensorSpec,
    seed: u64,
    go_on: &mut dyn FnMut(usize) -> bool,
) -> Option<Vec<f32>> {
    let n = spec.numel();
    if spec.is_norm {
        return Some(vec![spec.norm_init; n]);
    }
    let scale = if spec.name.ends_with(".bias") {
        0.02
    } else {
        1.0 / (spec.fan_in as f32).sqrt()
    };
    let mut rng = SplitMix64::new(seed ^ fnv1a(spec.name.as_bytes()));
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let next = (out.len() + VALUES_PER_LOOK).min(n);
        out.extend((out.len()..next).map(|_| rng.next_signed_unit() * scale));
        if !go_on(out.len()) {
            return None;
        }
    }
    Some(out)
}

/// Builds every tensor of the architecture on `device` in `dtype`, reporting bytes done (and
/// ending with an error when `progress` says not to go on).
pub fn build_tensors(
    cfg: &ArchConfig,
    seed: u64,
    dtype: DType,
    device: &Device,
    progress: &mut dyn FnMut(&str, u64, u64) -> bool,
) -> candle_core::Result<HashMap<String, Tensor>> {
    let specs = cfg.tensor_specs();
    let total: u64 = specs
        .iter()
        .map(|s| (s.numel() * dtype.size_in_bytes()) as u64)
        .sum();
    let mut done = 0u64;
    let mut out = HashMap::with_capacity(specs.len());
    for spec in &specs {
        let size = dtype.size_in_bytes() as u64;
        // Partway through a large tensor, then once it is built.
        let made = tensor_values_until(spec, seed, &mut |made| {
            made == spec.numel() || progress(&spec.name, done + made as u64 * size, total)
        });
        let Some(values) = made else {
            candle_core::bail!("{}", super::STOPPED);
        };
        let t = Tensor::from_vec(values, spec.shape.as_slice(), &Device::Cpu)?
            .to_dtype(dtype)?
            .to_device(device)?;
        done += (spec.numel() * dtype.size_in_bytes()) as u64;
        if !progress(&spec.name, done, total) {
            candle_core::bail!("{}", super::STOPPED);
        }
        out.insert(spec.name.clone(), t);
    }
    Ok(out)
}
