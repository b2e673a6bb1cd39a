//! Roofline: how close decode is to the memory-bandwidth limit and prefill to the compute limit.
//!
//! - **Decode** reads every weight it runs once per step plus the KV cache of every sequence:
//!   `bytes/step = weight bytes + kv_bytes_per_token × batch × context`. The weight bytes are
//!   those of the active parameters ([`ModelInfo::active_weight_bytes`]): all of them for a
//!   dense model, for a mixture of experts the shared weights and the experts one token is
//!   routed to (a batch routed to more experts reads more, so for batch > 1 this is a lower
//!   bound). [`decode_basis`] says which was used. The mean context
//!   over the decode steps of a request is `P + G/2` (step `s` of `1..G` attends over `P + s`
//!   positions). Utilisation = `bytes/step / TPOT / peak bandwidth`.
//! - **Prefill** does about `2 × params × prompt tokens × batch` FLOPs (one multiply-add per
//!   parameter per token; attention's own FLOPs are left out). Utilisation =
//!   `FLOPs / TTFT / peak FLOP/s`.
//!
//! Peak figures come from a table of known devices, from `--peak-bw` / `--peak-flops`, or from a
//! short probe of this CPU; [`Peak::basis`] always says which.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::event::ModelInfo;
use crate::util::format;

/// A device's peak memory bandwidth and dense FLOP/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KnownDevice {
    /// Lower-case name fragments that identify it, most specific first ("h100 pcie" before
    /// "h100").
    pub matches: &'static str,
    pub name: &'static str,
    /// Bytes per second.
    pub bandwidth: f64,
    /// Dense 16-bit tensor-core FLOP/s (bf16/f16).
    pub flops_16: f64,
    /// Dense f32 FLOP/s (no tensor cores).
    pub flops_32: f64,
}

const T: f64 = 1e12;

/// Vendor peak figures (dense, no sparsity), most specific names first.
pub const KNOWN_DEVICES: &[KnownDevice] = &[
    KnownDevice {
        matches: "b200",
        name: "NVIDIA B200",
        bandwidth: 8.0 * T,
        flops_16: 2250.0 * T,
        flops_32: 80.0 * T,
    },
    KnownDevice {
        matches: "h200",
        name: "NVIDIA H200",
        bandwidth: 4.8 * T,
        flops_16: 989.0 * T,
        flops_32: 67.0 * T,
    },
    KnownDevice {
        matches: "h100 pcie",
        name: "NVIDIA H100 PCIe",
        bandwidth: 2.0 * T,
        flops_16: 756.0 * T,
        flops_32: 51.0 * T,
    },
    KnownDevice {
        matches: "h100",
        name: "NVIDIA H100 SXM",
        bandwidth: 3.35 * T,
        flops_16: 989.0 * T,
        flops_32: 67.0 * T,
    },
    KnownDevice {
        matches: "a100-sxm4-40gb",
        name: "NVIDIA A100 40GB",
        bandwidth: 1.555 * T,
        flops_16: 312.0 * T,
        flops_32: 19.5 * T,
    },
    KnownDevice {
        matches: "a100-pcie-40gb",
        name: "NVIDIA A100 40GB PCIe",
        bandwidth: 1.555 * T,
        flops_16: 312.0 * T,
        flops_32: 19.5 * T,
    },
    KnownDevice {
        matches: "a100 80gb pcie",
        name: "NVIDIA A100 80GB PCIe",
        bandwidth: 1.935 * T,
        flops_16: 312.0 * T,
        flops_32: 19.5 * T,
    },
    KnownDevice {
        matches: "a100",
        name: "NVIDIA A100 80GB SXM",
        bandwidth: 2.039 * T,
        flops_16: 312.0 * T,
        flops_32: 19.5 * T,
    },
    KnownDevice {
        matches: "l40s",
        name: "NVIDIA L40S",
        bandwidth: 0.864 * T,
        flops_16: 362.0 * T,
        flops_32: 91.6 * T,
    },
    KnownDevice {
        matches: "l4",
        name: "NVIDIA L4",
        bandwidth: 0.3 * T,
        flops_16: 121.0 * T,
        flops_32: 30.3 * T,
    },
    KnownDevice {
        matches: "a10g",
        name: "NVIDIA A10G",
        bandwidth: 0.6 * T,
        flops_16: 70.0 * T,
        flops_32: 31.2 * T,
    },
    KnownDevice {
        matches: "a10",
        name: "NVIDIA A10",
        bandwidth: 0.6 * T,
        flops_16: 125.0 * T,
        flops_32: 31.2 * T,
    },
    KnownDevice {
        matches: "rtx 4090",
        name: "NVIDIA GeForce RTX 4090",
        bandwidth: 1.008 * T,
        flops_16: 165.2 * T,
        flops_32: 82.6 * T,
    },
    KnownDevice {
        matches: "rtx 3090",
        name: "NVIDIA GeForce RTX 3090",
        bandwidth: 0.936 * T,
        flops_16: 71.0 * T,
        flops_32: 35.6 * T,
    },
    KnownDevice {
        matches: "v100",
        name: "NVIDIA V100",
        bandwidth: 0.9 * T,
        flops_16: 125.0 * T,
        flops_32: 15.7 * T,
    },
    KnownDevice {
        matches: "t4",
        name: "NVIDIA T4",
        bandwidth: 0.32 * T,
        flops_16: 65.0 * T,
        flops_32: 8.1 * T,
    },
];

/// The known device whose name fragment occurs in `name` (case-insensitive), e.g.
/// "NVIDIA H100 80GB HBM3" → H100 SXM.
pub fn lookup(name: &str) -> Option<&'static KnownDevice> {
    let n = name.trim().to_ascii_lowercase();
    if let Some(d) = KNOWN_DEVICES
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(&n))
    {
        return Some(d);
    }
    KNOWN_DEVICES.iter().find(|d| {
        let m = d.matches;
        // "l4" must not match "l40s", "t4" not "rtx 4090": the fragment ends at a non-alnum.
        n.match_indices(m).any(|(i, _)| {
            let before = n[..i].chars().next_back();
            let after = n[i + m.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric())
                && !after.is_some_and(|c| c.is_ascii_alphanumeric())
        })
    })
}

/// The peak figures utilisation is measured against, and where they came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Peak {
    /// Bytes per second.
    pub bandwidth: Option<f64>,
    /// FLOP/s.
    pub flops: Option<f64>,
    /// In words: "table: NVIDIA H100 SXM (bf16 dense)", "--peak-bw", "probe on this CPU (...)".
    pub basis: Vec<String>,
}

impl Peak {
    /// From the known-device table; `dtype` picks the 16-bit or f32 FLOP figure.
    pub fn from_table(dev: &KnownDevice, dtype: &str) -> Peak {
        let sixteen = crate::event::FloatDtype::of_name(dtype).is_some_and(|d| d.is_16bit());
        Peak {
            bandwidth: Some(dev.bandwidth),
            flops: Some(if sixteen { dev.flops_16 } else { dev.flops_32 }),
            basis: vec![format!(
                "table: {} ({} dense, vendor peak)",
                dev.name,
                if sixteen { "16-bit tensor" } else { "f32" }
            )],
        }
    }
}

impl From<Peak> for crate::event::MachinePeak {
    fn from(p: Peak) -> Self {
        crate::event::MachinePeak {
            bandwidth: p.bandwidth,
            flops: p.flops,
            basis: p.basis,
        }
    }
}

/// What one part of a step moves and computes: bytes read from memory and FLOPs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    pub bytes: f64,
    pub flops: f64,
}

/// The work of a sampled step's parts (`--step-parts`), in `StepParts::PARTS` order then the
/// weight matmuls; `None` for the parts that have no such figure (input, rest, sample).
/// `tokens` the step ran (batch × new positions) and the `context` each sequence holds after
/// it (`StepParts::context`). Each part reads its weights once per step; attention also reads
/// the KV cache at the context and does `4 × layers × heads × head dim` FLOPs per attended
/// position (scores and values; a prefill of P attends P(P+1)/2 positions per sequence); the
/// head runs on the last position of each sequence only (as candle's models do); the
/// embedding reads one row per token. `None` where the model's part weights are not known.
pub fn part_work(
    m: &ModelInfo,
    prefill: bool,
    tokens: usize,
    context: usize,
) -> Option<[Option<Work>; 8]> {
    let w = m.parts?;
    if tokens == 0 || context == 0 {
        return None;
    }
    let (t, c) = (tokens as f64, context as f64);
    // Sequences, the positions each added, and the positions each attended over.
    let (batch, new) = if prefill { (t / c, c) } else { (t, 1.0) };
    let past = c - new;
    let attended = new * past + new * (new + 1.0) / 2.0;
    let per_position = 4.0 * (m.layers * m.heads * m.head_dim) as f64;
    let attention = Work {
        bytes: w.attention.bytes as f64 + batch * m.kv_bytes_at(c),
        flops: 2.0 * w.attention.params as f64 * t + per_position * batch * attended,
    };
    let mlp = Work {
        bytes: w.mlp.bytes as f64,
        flops: 2.0 * w.mlp.params as f64 * t,
    };
    let head = Work {
        bytes: w.head.bytes as f64,
        flops: 2.0 * w.head.params as f64 * batch,
    };
    let embedding = Work {
        bytes: w.embedding_row_bytes as f64 * t,
        flops: 0.0,
    };
    let matmuls = Work {
        bytes: (w.attention.bytes + w.mlp.bytes + w.head.bytes) as f64,
        flops: 2.0
            * ((w.attention.params + w.mlp.params) as f64 * t + w.head.params as f64 * batch),
    };
    Some([
        None,
        Some(embedding),
        Some(attention),
        Some(mlp),
        Some(head),
        None,
        None,
        Some(matmuls),
    ])
}

/// Which roof bounds a part: its FLOPs per byte below the machine's (peak FLOP/s over peak
/// bandwidth) and memory does; above, compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Memory,
    Compute,
}

/// A part against the roofline: what bounds it, and its rate as a share of that roof.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roof {
    pub bound: Bound,
    /// Achieved / peak of the bounding resource (0.5 = 50 %).
    pub of_peak: f64,
}

/// `work` done in `seconds` against `peak` (both peaks needed to tell the bound; with only a
/// bandwidth, a part with fewer FLOPs per byte than 1 is taken as memory-bound).
pub fn roof(work: Work, seconds: f64, peak: &crate::event::MachinePeak) -> Option<Roof> {
    if seconds <= 0.0 || work.bytes <= 0.0 {
        return None;
    }
    let bw = peak.bandwidth.filter(|b| *b > 0.0);
    let flops = peak.flops.filter(|f| *f > 0.0);
    let intensity = work.flops / work.bytes;
    let memory = match (bw, flops) {
        (Some(b), Some(f)) => intensity < f / b,
        (Some(_), None) => intensity < 1.0,
        (None, Some(_)) => false,
        (None, None) => return None,
    };
    match (memory, bw, flops) {
        (true, Some(b), _) => Some(Roof {
            bound: Bound::Memory,
            of_peak: work.bytes / seconds / b,
        }),
        (false, _, Some(f)) if work.flops > 0.0 => Some(Roof {
            bound: Bound::Compute,
            of_peak: work.flops / seconds / f,
        }),
        _ => None,
    }
}

/// Bytes decode reads per step of a request: weights + the KV cache of `m` at the mean context
/// `P + G/2` (sliding-window layers: the mean of what their window holds).
pub fn decode_bytes_per_step(
    weight_bytes: u64,
    m: &ModelInfo,
    prompt_tokens: usize,
    output_tokens: usize,
    batch: usize,
) -> f64 {
    weight_bytes as f64 + m.decode_kv_bytes(prompt_tokens, output_tokens) * batch as f64
}

/// What the decode bytes per step count, in words, for reports.
pub fn decode_basis(m: &ModelInfo) -> String {
    if m.is_sparse() {
        let count = |n: u64| format::si(n as f64);
        format!(
            "active weights ({} of {} parameters: shared weights + the experts one token is routed to; a lower bound for batch > 1) + KV cache at the mean context",
            count(m.active()),
            count(m.params)
        )
    } else {
        "weights + KV cache at the mean context".to_string()
    }
}

/// Prefill FLOPs: `2 × params × prompt tokens × batch` (active parameters for a mixture of
/// experts: a token multiplies only through the experts it is routed to).
pub fn prefill_flops(params: u64, prompt_tokens: usize, batch: usize) -> f64 {
    2.0 * params as f64 * prompt_tokens as f64 * batch as f64
}

/// Achieved / peak, as a fraction (0.5 = 50 %). `None` if any input is not positive.
pub fn utilisation(work: f64, seconds: f64, peak_per_s: f64) -> Option<f64> {
    (work > 0.0 && seconds > 0.0 && peak_per_s > 0.0).then(|| work / seconds / peak_per_s)
}

/// Decode bandwidth utilisation of one request (TPOT is its mean step time).
pub fn decode_utilisation(
    m: &ModelInfo,
    prompt: usize,
    output: usize,
    batch: usize,
    tpot_s: f64,
    peak_bw: f64,
) -> Option<f64> {
    let bytes = decode_bytes_per_step(m.active_weight_bytes(), m, prompt, output, batch);
    utilisation(bytes, tpot_s, peak_bw)
}

/// Prefill compute utilisation of one request.
pub fn prefill_utilisation(
    m: &ModelInfo,
    prompt: usize,
    batch: usize,
    ttft_s: f64,
    peak_flops: f64,
) -> Option<f64> {
    utilisation(prefill_flops(m.active(), prompt, batch), ttft_s, peak_flops)
}

/// Parses a bandwidth: `3.35TB/s`, `900GB/s`, `900G`, or a bare number of GB/s. Bytes/s.
pub fn parse_bandwidth(text: &str) -> Result<f64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix("/s").unwrap_or(&t);
    let t = t.strip_suffix('b').unwrap_or(t);
    parse_scaled(t, 1e9).map_err(|_| {
        format!("`{text}` is not a bandwidth (e.g. 3.35TB/s, 900GB/s; a bare number is GB/s)")
    })
}

/// Parses FLOP/s: `989T`, `989TFLOPS`, `1.2P`, or a bare number of TFLOP/s.
pub fn parse_flops(text: &str) -> Result<f64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix("/s").unwrap_or(&t);
    let t = t
        .strip_suffix("flops")
        .or_else(|| t.strip_suffix("flop"))
        .unwrap_or(t);
    parse_scaled(t, 1e12).map_err(|_| {
        format!("`{text}` is not a FLOP rate (e.g. 989T, 1.2P; a bare number is TFLOP/s)")
    })
}

fn parse_scaled(t: &str, bare: f64) -> Result<f64, ()> {
    let t = t.trim();
    let (num, scale) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        Some('t') => (&t[..t.len() - 1], 1e12),
        Some('p') => (&t[..t.len() - 1], 1e15),
        _ => (t, bare),
    };
    let v: f64 = num.trim().parse().map_err(|_| ())?;
    if v.is_finite() && v > 0.0 {
        Ok(v * scale)
    } else {
        Err(())
    }
}

/// Measures this machine's memory bandwidth: every core copies its share of a 256 MiB buffer
/// for about `budget`. Counts bytes read + written. Bytes/s.
pub fn probe_cpu_bandwidth(budget: Duration) -> f64 {
    const TOTAL: usize = 256 << 20;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(1);
    let chunk = TOTAL / threads;
    let mut src = vec![1u8; chunk * threads];
    let mut dst = vec![0u8; chunk * threads];
    // Touch both buffers once so page faults are not timed.
    dst.copy_from_slice(&src);
    src[0] = 2;
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < budget || rounds == 0 {
        std::thread::scope(|s| {
            for (d, sr) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                s.spawn(move || d.copy_from_slice(sr));
            }
        });
        rounds += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(&dst);
    2.0 * (chunk * threads) as f64 * rounds as f64 / secs
}

/// Measures this machine's f32 matmul FLOP/s with candle's CPU kernels (the ones a CPU run
/// uses), on 1024×1024 matrices for about `budget`.
pub fn probe_cpu_flops(budget: Duration) -> Result<f64, String> {
    use candle_core::{Device, Tensor};
    const N: usize = 1024;
    let dev = Device::Cpu;
    let a = Tensor::ones((N, N), candle_core::DType::F32, &dev).map_err(|e| e.to_string())?;
    let b = Tensor::ones((N, N), candle_core::DType::F32, &dev).map_err(|e| e.to_string())?;
    let _ = a.matmul(&b).map_err(|e| e.to_string())?; // warm the thread pool
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < budget || rounds == 0 {
        let c = a.matmul(&b).map_err(|e| e.to_string())?;
        std::hint::black_box(&c);
        rounds += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(2.0 * (N * N * N) as f64 * rounds as f64 / secs)
}

/// Both CPU probes, ~0.2 s each, with a basis line.
pub fn probe_cpu() -> Peak {
    let bw = probe_cpu_bandwidth(Duration::from_millis(200));
    let mut basis = vec![format!(
        "probe on this machine now: memcpy of 256 MiB on {} threads, {} read+write",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        format::si_unit(bw, "B/s")
    )];
    let flops = match probe_cpu_flops(Duration::from_millis(200)) {
        Ok(f) => {
            basis.push(format!(
                "candle f32 matmul 1024×1024, {}",
                format::si_unit(f, "FLOP/s")
            ));
            Some(f)
        }
        Err(e) => {
            basis.push(format!("FLOP probe failed ({e})"));
            None
        }
    };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok());
    if let Some(l) = load.filter(|&l| l > 0.5 * cores as f64) {
        basis.push(format!(
            "the machine was busy during the probe (load average {l:.1} on {cores} cores): the probe reads low"
        ));
    }
    Peak {
        bandwidth: Some(bw),
        flops,
        basis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelInfo {
        ModelInfo {
            name: "m".into(),
            arch: "llama".into(),
            source: crate::event::ModelSource::Synthetic,
            params: 1_000_000_000,
            active_params: 1_000_000_000,
            weight_bytes: 2_000_000_000,
            kv_bytes_per_token: 100_000,
            kv_window: None,
            dtype: "bf16".into(),
            device: "cuda:0".into(),
            max_positions: 4096,
            layers: 16,
            hidden: 2048,
            heads: 16,
            kv_heads: 8,
            head_dim: 128,
            vocab: 32000,
            parts: None,
        }
    }

    #[test]
    fn a_steps_parts_work_by_hand() {
        use crate::event::{MachinePeak, PartWeights, Weights};
        let w = |params: u64| Weights {
            params,
            bytes: 2 * params,
        };
        let m = ModelInfo {
            parts: Some(PartWeights {
                attention: w(1_000),
                mlp: w(3_000),
                head: w(500),
                embedding_row_bytes: 64,
            }),
            ..model()
        };
        // 4 × 16 layers × 16 heads × 128 = 131,072 FLOPs per attended position.
        let per_position = 131_072.0;
        // Decode step at context 101: one position added, 101 attended; the KV cache read.
        let d = part_work(&m, false, 1, 101).unwrap();
        let attn = d[2].unwrap();
        assert_eq!(attn.bytes, 2_000.0 + 100_000.0 * 101.0);
        assert_eq!(attn.flops, 2.0 * 1_000.0 + per_position * 101.0);
        assert_eq!(
            d[3].unwrap(),
            Work {
                bytes: 6_000.0,
                flops: 6_000.0
            }
        );
        assert_eq!(d[4].unwrap().flops, 1_000.0);
        assert_eq!(d[1].unwrap().bytes, 64.0);
        assert_eq!((d[0], d[5], d[6]), (None, None, None));
        // Prefill of 100 positions for 2 sequences: 200 tokens, each sequence attends
        // 100 × 101 / 2 = 5,050 positions, and the head runs on 2 rows only.
        let p = part_work(&m, true, 200, 100).unwrap();
        assert_eq!(
            p[2].unwrap().flops,
            2.0 * 1_000.0 * 200.0 + per_position * 2.0 * 5_050.0
        );
        assert_eq!(p[2].unwrap().bytes, 2_000.0 + 2.0 * 100_000.0 * 100.0);
        assert_eq!(p[4].unwrap().flops, 2.0 * 500.0 * 2.0);
        assert_eq!(p[7].unwrap().bytes, 9_000.0);
        // Unknown parts, or an older record's step without its context: no figures.
        assert_eq!(part_work(&model(), false, 1, 101), None);
        assert_eq!(part_work(&m, false, 1, 0), None);

        // The roof: 20 GB/s and 100 GFLOP/s make 5 FLOPs per byte the ridge.
        let peak = MachinePeak {
            bandwidth: Some(20e9),
            flops: Some(100e9),
            basis: vec![],
        };
        let r = roof(
            Work {
                bytes: 1e9,
                flops: 1e9,
            },
            0.1,
            &peak,
        )
        .unwrap();
        assert_eq!((r.bound, r.of_peak), (Bound::Memory, 0.5));
        let r = roof(
            Work {
                bytes: 1e9,
                flops: 1e12,
            },
            100.0,
            &peak,
        )
        .unwrap();
        assert_eq!((r.bound, r.of_peak), (Bound::Compute, 0.1));
        assert_eq!(
            roof(
                Work {
                    bytes: 1e9,
                    flops: 1e9
                },
                0.0,
                &peak
            ),
            None
        );
    }

    #[test]
    fn decode_bytes_by_hand() {
        // P = 100, G = 20 → mean context 110; 2 sequences → 2 GB + 100 kB × 2 × 110 = 2.022 GB.
        let b = decode_bytes_per_step(2_000_000_000, &model(), 100, 20, 2);
        assert_eq!(b, 2_022_000_000.0);
    }

    #[test]
    fn a_mixture_of_experts_reads_its_active_weights() {
        // Mixtral-8x7B's shape in bf16: 46.7B parameters, 12.9B of them per token.
        let moe = ModelInfo {
            arch: "mixtral".into(),
            params: 46_700_000_000,
            active_params: 12_900_000_000,
            weight_bytes: 93_400_000_000,
            ..model()
        };
        assert_eq!(moe.active_weight_bytes(), 25_800_000_000);
        // 25.8 GB + 100 kB × 2 × 110 per step in 10 ms, against 3.35 TB/s.
        let u = decode_utilisation(&moe, 100, 20, 2, 1e-2, 3.35e12).unwrap();
        assert!((u - 25.822e9 / 1e-2 / 3.35e12).abs() < 1e-12, "{u}");
        assert!(decode_basis(&moe).starts_with("active weights (12.9B of 46.7B parameters"));
        // Prefill multiplies through the active parameters only.
        let p = prefill_utilisation(&moe, 100, 1, 1.0, 1e15).unwrap();
        assert!((p - 2.0 * 12.9e9 * 100.0 / 1e15).abs() < 1e-12, "{p}");
        // Dense, and records written before active_params existed (0): all weights.
        assert_eq!(model().active_weight_bytes(), 2_000_000_000);
        let old = ModelInfo {
            active_params: 0,
            ..model()
        };
        assert_eq!(old.active(), old.params);
        assert_eq!(decode_basis(&old), "weights + KV cache at the mean context");
    }

    #[test]
    fn decode_utilisation_by_hand() {
        // 2.022 GB per step in 1 ms = 2.022 TB/s; against 3.35 TB/s that is 60.358… %.
        let u = decode_utilisation(&model(), 100, 20, 2, 1e-3, 3.35e12).unwrap();
        assert!((u - 2.022 / 3.35).abs() < 1e-12, "{u}");
    }

    #[test]
    fn prefill_by_hand() {
        // 2 × 1e9 × 512 × 4 = 4.096e12 FLOPs in 10 ms = 409.6 TFLOP/s; of 989 T = 41.415… %.
        assert_eq!(prefill_flops(1_000_000_000, 512, 4), 4.096e12);
        let u = prefill_utilisation(&model(), 512, 4, 0.010, 989e12).unwrap();
        assert!((u - 409.6 / 989.0).abs() < 1e-12, "{u}");
        assert_eq!(utilisation(1.0, 0.0, 1.0), None);
        assert_eq!(utilisation(1.0, 1.0, 0.0), None);
    }

    #[test]
    fn known_devices_by_nvml_name() {
        let name = |s: &str| lookup(s).map(|d| d.name);
        assert_eq!(name("NVIDIA H100 80GB HBM3"), Some("NVIDIA H100 SXM"));
        assert_eq!(name("NVIDIA H100 PCIe"), Some("NVIDIA H100 PCIe"));
        assert_eq!(name("NVIDIA H200"), Some("NVIDIA H200"));
        assert_eq!(name("NVIDIA A100-SXM4-80GB"), Some("NVIDIA A100 80GB SXM"));
        assert_eq!(name("NVIDIA A100-SXM4-40GB"), Some("NVIDIA A100 40GB"));
        assert_eq!(name("NVIDIA L4"), Some("NVIDIA L4"));
        assert_eq!(name("NVIDIA L40S"), Some("NVIDIA L40S"));
        assert_eq!(
            name("NVIDIA GeForce RTX 4090"),
            Some("NVIDIA GeForce RTX 4090")
        );
        assert_eq!(name("Tesla T4"), Some("NVIDIA T4"));
        assert_eq!(name("AMD EPYC"), None);
        // Every table name finds itself.
        for d in KNOWN_DEVICES {
            assert_eq!(name(d.name), Some(d.name));
        }
        let p = Peak::from_table(lookup("h200").unwrap(), "bf16");
        assert_eq!((p.bandwidth, p.flops), (Some(4.8e12), Some(989e12)));
        let p = Peak::from_table(lookup("h200").unwrap(), "f32");
        assert_eq!(p.flops, Some(67e12));
    }

    #[test]
    fn parse_peaks() {
        assert_eq!(parse_bandwidth("3.35TB/s").unwrap(), 3.35e12);
        assert_eq!(parse_bandwidth("900GB/s").unwrap(), 900e9);
        assert_eq!(parse_bandwidth("900").unwrap(), 900e9);
        assert_eq!(parse_flops("989T").unwrap(), 989e12);
        assert_eq!(parse_flops("989 TFLOPS").unwrap(), 989e12);
        assert_eq!(parse_flops("1.5P").unwrap(), 1.5e15);
        assert_eq!(parse_flops("312").unwrap(), 312e12);
        assert!(parse_bandwidth("fast").is_err());
        assert!(parse_flops("-3T").is_err());
    }

    #[test]
    fn probes_measure_something() {
        let bw = probe_cpu_bandwidth(Duration::from_millis(20));
        assert!(bw > 1e8 && bw.is_finite(), "{bw}");
        let f = probe_cpu_flops(Duration::from_millis(20)).unwrap();
        assert!(f > 1e7 && f.is_finite(), "{f}");
    }
}
