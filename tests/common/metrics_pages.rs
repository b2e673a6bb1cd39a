//! Real-sized Prometheus pages for tests and benches, with the names and label sets the
//! exporters really write: a vLLM server's `/metrics` (about 50 KB with one engine: every
//! histogram vLLM's PrometheusStatLogger registers, with its buckets, `_count`, `_sum` and
//! `_created`; the API server's HTTP metrics; Python's process and GC metrics), NVIDIA's
//! DCGM exporter (its default counters, per GPU) and node_exporter's CPU, memory, load and
//! InfiniBand lines. Counters grow by the same batch of observations every scrape, so the
//! window between scrape k − 1 and k is known exactly: `requests` requests whose TTFTs are
//! spread evenly over [0.5, 1.5] × `ttft_s`.
#![allow(dead_code)] // each test or bench uses part of it

use std::fmt::Write;

/// What a server page says.
#[derive(Clone, Debug)]
pub struct VllmSpec {
    pub model: String,
    /// Data-parallel engines (the `engine` label).
    pub engines: usize,
    /// Requests finished per scrape, per engine.
    pub requests: u64,
    /// The middle of the TTFT spread, seconds.
    pub ttft_s: f64,
    pub itl_s: f64,
    pub queue_s: f64,
    pub running: u64,
    pub waiting: u64,
    pub kv_usage: f64,
    /// Speculative decoding counters (draft tokens per scrape, accepted share).
    pub spec: Option<(u64, f64)>,
    /// `--enable-mfu-metrics` counters (FLOPs per GPU per scrape).
    pub mfu_flops: Option<f64>,
}

impl Default for VllmSpec {
    fn default() -> VllmSpec {
        VllmSpec {
            model: "meta-llama/Llama-3.1-8B-Instruct".into(),
            engines: 1,
            requests: 20,
            ttft_s: 0.12,
            itl_s: 0.02,
            queue_s: 0.05,
            running: 8,
            waiting: 0,
            kv_usage: 0.35,
            spec: None,
            mfu_flops: None,
        }
    }
}

const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const TPOT_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
const REQUEST_LATENCY_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
const TOKEN_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];
const ITERATION_BUCKETS: &[f64] = &[
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];
const N_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0];
const HTTP_HIGHR_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    7.5, 10.0, 30.0, 60.0,
];

/// `n` observations spread evenly over [0.5, 1.5] × `mid`.
fn spread(n: u64, mid: f64) -> Vec<f64> {
    (0..n)
        .map(|i| mid * (0.5 + (i as f64 + 0.5) / n.max(1) as f64))
        .collect()
}

fn le(b: f64) -> String {
    if b.fract() == 0.0 && b >= 1.0 {
        format!("{b:.1}")
    } else {
        format!("{b}")
    }
}

/// One histogram series: `values` observed `k` times.
fn histogram(out: &mut String, name: &str, labels: &str, buckets: &[f64], values: &[f64], k: u64) {
    let k = k as f64;
    for &b in buckets {
        let n = values.iter().filter(|v| **v <= b).count() as f64 * k;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{}\"}} {n:.1}", le(b));
    }
    let total = values.len() as f64 * k;
    let sum: f64 = values.iter().sum::<f64>() * k;
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {total:.1}");
    let _ = writeln!(out, "{name}_count{{{labels}}} {total:.1}");
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
}

fn help(out: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
}

/// A vLLM server's page at scrape `k` (k = 0: nothing served yet).
pub fn vllm_page(spec: &VllmSpec, k: u64) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let created = 1_754_000_000.0_f64;
    // Python and the process, as prometheus_client's default collectors write them.
    help(
        &mut out,
        "python_gc_objects_collected_total",
        "counter",
        "Objects collected during gc",
    );
    for g in 0..3 {
        let _ = writeln!(
            out,
            "python_gc_objects_collected_total{{generation=\"{g}\"}} {}.0",
            1000 * (g + 1) + k
        );
    }
    help(
        &mut out,
        "python_gc_collections_total",
        "counter",
        "Number of times this generation was collected",
    );
    for g in 0..3 {
        let _ = writeln!(
            out,
            "python_gc_collections_total{{generation=\"{g}\"}} {}.0",
            100 * (3 - g) + k
        );
    }
    help(
        &mut out,
        "python_info",
        "gauge",
        "Python platform information",
    );
    let _ = writeln!(out, "python_info{{implementation=\"CPython\",major=\"3\",minor=\"12\",patchlevel=\"3\",version=\"3.12.3\"}} 1.0");
    for (name, v) in [
        ("process_virtual_memory_bytes", 5.2e10),
        ("process_resident_memory_bytes", 3.1e9),
        ("process_start_time_seconds", created),
        ("process_cpu_seconds_total", 1234.5 + k as f64),
        ("process_open_fds", 512.0),
        ("process_max_fds", 1_048_576.0),
    ] {
        help(
            &mut out,
            name,
            if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            },
            "Process figure.",
        );
        let _ = writeln!(out, "{name} {v}");
    }
    let model = &spec.model;
    let per_engine = |e: usize| format!("engine=\"{e}\",model_name=\"{model}\"");
    help(
        &mut out,
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
    );
    for e in 0..spec.engines {
        let _ = writeln!(
            out,
            "vllm:num_requests_running{{{}}} {}.0",
            per_engine(e),
            spec.running
        );
    }
    help(
        &mut out,
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
    );
    for e in 0..spec.engines {
        let _ = writeln!(
            out,
            "vllm:num_requests_waiting{{{}}} {}.0",
            per_engine(e),
            spec.waiting
        );
    }
    for name in ["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"] {
        help(
            &mut out,
            name,
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
        );
        for e in 0..spec.engines {
            let _ = writeln!(out, "{name}{{{}}} {}", per_engine(e), spec.kv_usage);
        }
    }
    let requests = spec.requests;
    let prompt_len = 512.0;
    let gen_len = 128.0;
    let counter = |out: &mut String, name: &str, text: &str, per_scrape: f64| {
        help(out, name, "counter", text);
        for e in 0..spec.engines {
            let _ = writeln!(
                out,
                "{name}{{{}}} {:.1}",
                per_engine(e),
                per_scrape * k as f64
            );
        }
        let created_name = name.trim_end_matches("_total").to_string() + "_created";
        help(out, &created_name, "gauge", text);
        for e in 0..spec.engines {
            let _ = writeln!(out, "{created_name}{{{}}} {created}", per_engine(e));
        }
    };
    counter(
        &mut out,
        "vllm:gpu_prefix_cache_queries_total",
        "GPU prefix cache queries.",
        1000.0,
    );
    counter(
        &mut out,
        "vllm:gpu_prefix_cache_hits_total",
        "GPU prefix cache hits.",
        600.0,
    );
    counter(
        &mut out,
        "vllm:prefix_cache_queries_total",
        "Prefix cache queries, in terms of number of queried tokens.",
        1000.0,
    );
    counter(
        &mut out,
        "vllm:prefix_cache_hits_total",
        "Prefix cache hits, in terms of number of cached tokens.",
        600.0,
    );
    counter(
        &mut out,
        "vllm:num_preemptions_total",
        "Cumulative number of preemption from the engine.",
        0.0,
    );
    counter(
        &mut out,
        "vllm:prompt_tokens_total",
        "Number of prefill tokens processed.",
        requests as f64 * prompt_len,
    );
    counter(
        &mut out,
        "vllm:generation_tokens_total",
        "Number of generation tokens processed.",
        requests as f64 * gen_len,
    );
    if let Some((drafted, accepted)) = spec.spec {
        counter(
            &mut out,
            "vllm:spec_decode_num_drafts_total",
            "Number of spec decoding drafts.",
            drafted as f64 / 3.0,
        );
        counter(
            &mut out,
            "vllm:spec_decode_num_draft_tokens_total",
            "Number of draft tokens.",
            drafted as f64,
        );
        counter(
            &mut out,
            "vllm:spec_decode_num_accepted_tokens_total",
            "Number of accepted tokens.",
            drafted as f64 * accepted,
        );
    }
    if let Some(flops) = spec.mfu_flops {
        counter(
            &mut out,
            "vllm:estimated_flops_per_gpu_total",
            "Estimated number of floating point operations per GPU.",
            flops,
        );
        counter(
            &mut out,
            "vllm:estimated_read_bytes_per_gpu_total",
            "Estimated number of bytes read from memory per GPU.",
            flops / 100.0,
        );
        counter(
            &mut out,
            "vllm:estimated_write_bytes_per_gpu_total",
            "Estimated number of bytes written to memory per GPU.",
            flops / 400.0,
        );
    }
    help(
        &mut out,
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
    );
    for e in 0..spec.engines {
        for (reason, share) in [("stop", 0.8), ("length", 0.2), ("abort", 0.0)] {
            let _ = writeln!(
                out,
                "vllm:request_success_total{{{},finished_reason=\"{reason}\"}} {:.1}",
                per_engine(e),
                requests as f64 * share * k as f64
            );
        }
    }
    let hist = |out: &mut String, name: &str, text: &str, buckets: &[f64], values: &[f64]| {
        help(out, name, "histogram", text);
        for e in 0..spec.engines {
            histogram(out, name, &per_engine(e), buckets, values, k);
        }
        help(out, &format!("{name}_created"), "gauge", text);
        for e in 0..spec.engines {
            let _ = writeln!(out, "{name}_created{{{}}} {created}", per_engine(e));
        }
    };
    let ttft = spread(requests, spec.ttft_s);
    let itl = spread(requests * 10, spec.itl_s);
    let e2e: Vec<f64> = ttft.iter().map(|t| t + gen_len * spec.itl_s).collect();
    let queue = spread(requests, spec.queue_s);
    let prefill: Vec<f64> = ttft.iter().map(|t| t * 0.8).collect();
    let decode: Vec<f64> = e2e.iter().zip(&ttft).map(|(e, t)| e - t).collect();
    let lens = |mid: f64| spread(requests, mid);
    hist(
        &mut out,
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        ITERATION_BUCKETS,
        &spread(requests * 4, 256.0),
    );
    hist(
        &mut out,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        TTFT_BUCKETS,
        &ttft,
    );
    hist(
        &mut out,
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        TPOT_BUCKETS,
        &itl,
    );
    hist(
        &mut out,
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        TPOT_BUCKETS,
        &itl,
    );
    hist(
        &mut out,
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        REQUEST_LATENCY_BUCKETS,
        &e2e,
    );
    hist(
        &mut out,
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        REQUEST_LATENCY_BUCKETS,
        &queue,
    );
    hist(
        &mut out,
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        REQUEST_LATENCY_BUCKETS,
        &e2e,
    );
    hist(
        &mut out,
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        REQUEST_LATENCY_BUCKETS,
        &prefill,
    );
    hist(
        &mut out,
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        REQUEST_LATENCY_BUCKETS,
        &decode,
    );
    hist(
        &mut out,
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        TOKEN_BUCKETS,
        &lens(prompt_len),
    );
    hist(
        &mut out,
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        TOKEN_BUCKETS,
        &lens(gen_len),
    );
    hist(
        &mut out,
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        TOKEN_BUCKETS,
        &lens(gen_len),
    );
    hist(
        &mut out,
        "vllm:request_params_n",
        "Histogram of the n request parameter.",
        N_BUCKETS,
        &vec![1.0; requests as usize],
    );
    hist(
        &mut out,
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        TOKEN_BUCKETS,
        &lens(gen_len),
    );
    help(
        &mut out,
        "vllm:cache_config_info",
        "gauge",
        "Information of the LLMEngine CacheConfig",
    );
    for e in 0..spec.engines {
        let _ = writeln!(out, "vllm:cache_config_info{{block_size=\"16\",cache_dtype=\"auto\",calculate_kv_scales=\"False\",cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",engine=\"{e}\",gpu_memory_utilization=\"0.9\",is_attention_free=\"False\",num_cpu_blocks=\"None\",num_gpu_blocks=\"29425\",num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"sha256\",sliding_window=\"None\",swap_space=\"4\",swap_space_bytes=\"4294967296\"}} 1.0");
    }
    // The API server (prometheus-fastapi-instrumentator), our own scrapes of /metrics included.
    help(
        &mut out,
        "http_requests_total",
        "counter",
        "Total number of requests by method, status and handler.",
    );
    for (handler, status, per) in [
        (
            "/v1/completions",
            "2xx",
            requests as f64 * spec.engines as f64,
        ),
        ("/v1/completions", "4xx", 0.0),
        ("/v1/chat/completions", "2xx", 0.0),
        ("/metrics", "2xx", 1.0),
        ("/health", "2xx", 1.0),
    ] {
        let _ = writeln!(
            out,
            "http_requests_total{{handler=\"{handler}\",method=\"{}\",status=\"{status}\"}} {:.1}",
            if handler.starts_with("/v1") {
                "POST"
            } else {
                "GET"
            },
            per * k as f64
        );
    }
    for name in ["http_request_size_bytes", "http_response_size_bytes"] {
        help(
            &mut out,
            name,
            "summary",
            "Content length of requests and responses.",
        );
        for handler in ["/v1/completions", "/metrics", "/health"] {
            let _ = writeln!(out, "{name}_count{{handler=\"{handler}\"}} {}.0", k);
            let _ = writeln!(out, "{name}_sum{{handler=\"{handler}\"}} {}.0", 2048 * k);
            let _ = writeln!(out, "{name}_created{{handler=\"{handler}\"}} {created}");
        }
    }
    help(
        &mut out,
        "http_request_duration_highr_seconds",
        "histogram",
        "Latency with many buckets but no API specific labels.",
    );
    {
        // Written without labels: the instrumentator's high-resolution histogram has none.
        let mut h = String::new();
        histogram(
            &mut h,
            "http_request_duration_highr_seconds",
            "service=\"vllm\"",
            HTTP_HIGHR_BUCKETS,
            &e2e,
            k,
        );
        out.push_str(
            &h.replace("{service=\"vllm\",", "{")
                .replace("{service=\"vllm\"}", ""),
        );
    }
    help(
        &mut out,
        "http_request_duration_seconds",
        "histogram",
        "Latency with only few buckets by handler.",
    );
    for handler in ["/v1/completions", "/metrics", "/health"] {
        histogram(
            &mut out,
            "http_request_duration_seconds",
            &format!("handler=\"{handler}\",method=\"POST\""),
            &[0.1, 0.5, 1.0],
            &e2e,
            k,
        );
    }
    out
}

/// DCGM exporter's page for `gpus` GPUs of `host`, GPU i at `util[i % len]` percent.
pub fn dcgm_page(host: &str, gpus: usize, util: &[f64]) -> String {
    let mut out = String::with_capacity(48 * 1024);
    let fields: &[(&str, &str, &str)] = &[
        (
            "DCGM_FI_DEV_SM_CLOCK",
            "gauge",
            "SM clock frequency (in MHz).",
        ),
        (
            "DCGM_FI_DEV_MEM_CLOCK",
            "gauge",
            "Memory clock frequency (in MHz).",
        ),
        (
            "DCGM_FI_DEV_MEMORY_TEMP",
            "gauge",
            "Memory temperature (in C).",
        ),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
        ),
        (
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            "counter",
            "Total number of PCIe retries.",
        ),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
        (
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "gauge",
            "Memory utilization (in %).",
        ),
        (
            "DCGM_FI_DEV_ENC_UTIL",
            "gauge",
            "Encoder utilization (in %).",
        ),
        (
            "DCGM_FI_DEV_DEC_UTIL",
            "gauge",
            "Decoder utilization (in %).",
        ),
        (
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            "Value of the last XID error encountered.",
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "gauge",
            "Framebuffer memory free (in MiB).",
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "gauge",
            "Framebuffer memory used (in MiB).",
        ),
        (
            "DCGM_FI_DEV_FB_RESERVED",
            "gauge",
            "Framebuffer memory reserved (in MiB).",
        ),
        (
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
            "counter",
            "Total number of NVLink bandwidth counters for all lanes.",
        ),
        (
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
            "gauge",
            "vGPU License status",
        ),
        (
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            "counter",
            "Number of remapped rows for uncorrectable errors",
        ),
        (
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
            "counter",
            "Number of remapped rows for correctable errors",
        ),
        (
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            "gauge",
            "Whether remapping of rows has failed",
        ),
        (
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "gauge",
            "Ratio of time the graphics engine is active.",
        ),
        (
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "gauge",
            "Ratio of cycles the tensor (HMMA) pipe is active.",
        ),
        (
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "gauge",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
        ),
        (
            "DCGM_FI_PROF_PCIE_TX_BYTES",
            "gauge",
            "The rate of data transmitted over the PCIe bus.",
        ),
        (
            "DCGM_FI_PROF_PCIE_RX_BYTES",
            "gauge",
            "The rate of data received over the PCIe bus.",
        ),
    ];
    for (name, kind, text) in fields {
        help(&mut out, name, kind, text);
        for g in 0..gpus {
            let u = util.get(g % util.len().max(1)).copied().unwrap_or(0.0);
            let v = match *name {
                "DCGM_FI_DEV_GPU_UTIL" => u,
                "DCGM_FI_DEV_MEM_COPY_UTIL" => u / 2.0,
                "DCGM_FI_DEV_FB_USED" => 70000.0,
                "DCGM_FI_DEV_FB_FREE" => 11000.0,
                "DCGM_FI_DEV_FB_RESERVED" => 559.0,
                "DCGM_FI_DEV_POWER_USAGE" => 100.0 + 6.0 * u,
                "DCGM_FI_DEV_SM_CLOCK" => 1980.0,
                "DCGM_FI_DEV_MEM_CLOCK" => 2619.0,
                "DCGM_FI_DEV_GPU_TEMP" => 40.0 + u / 4.0,
                "DCGM_FI_PROF_DRAM_ACTIVE" => u / 150.0,
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" => u / 300.0,
                _ => 0.0,
            };
            let _ = writeln!(
                out,
                "{name}{{gpu=\"{g}\",UUID=\"GPU-{g:08x}-0000-0000-0000-{host:>12}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{g}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{host}\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"}} {v}",
                0x18 + g * 0x10
            );
        }
    }
    out
}

/// node_exporter's CPU, memory, load and InfiniBand lines at scrape `k` (CPUs 60 % busy).
pub fn node_exporter_page(cpus: usize, k: u64) -> String {
    let mut out = String::new();
    help(
        &mut out,
        "node_cpu_seconds_total",
        "counter",
        "Seconds the CPUs spent in each mode.",
    );
    for c in 0..cpus {
        for (mode, per) in [
            ("idle", 0.4),
            ("iowait", 0.0),
            ("user", 0.5),
            ("system", 0.1),
        ] {
            let _ = writeln!(
                out,
                "node_cpu_seconds_total{{cpu=\"{c}\",mode=\"{mode}\"}} {}",
                1000.0 + per * k as f64
            );
        }
    }
    let _ = writeln!(
        out,
        "node_memory_MemTotal_bytes 2.0e12\nnode_memory_MemAvailable_bytes 1.5e12\nnode_load1 12.5"
    );
    help(
        &mut out,
        "node_infiniband_port_data_received_bytes_total",
        "counter",
        "Number of data octets received on all links",
    );
    for d in 0..4 {
        let _ = writeln!(
            out,
            "node_infiniband_port_data_received_bytes_total{{device=\"mlx5_{d}\",port=\"1\"}} {}",
            1e9 * k as f64
        );
    }
    out
}
