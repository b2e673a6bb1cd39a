//! Random weights of a named shape from our own seeded generator, built in memory.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};

use super::config::{ArchConfig, TensorSpec};

/// SplitMix64: small, fast, and the same numbers on every machine for a given seed.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn next_signed_unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Uniform integer in [lo, hi] (inclusive).
    pub fn next_in(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// FNV-1a 64, used to derive per-tensor seeds and to hash outputs.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// The values of one tensor: uniform in ±1/√fan_in (so activations stay in range), norms at 1.
/// Seeded per tensor name, so the weights do not depend on generation order.
pub fn tensor_values(spec: &TensorSpec, seed: u64) -> Vec<f32> {
    let n = spec.numel();
    if spec.is_norm {
        return vec![1.0; n];
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
