//! The engine a run drives, planned from its flags: the candle worker's configuration (the model
//! checked without loading its weights, the prompts tokenized) or the http engine's (endpoints,
//! prompts of exact length when a tokenizer is given). Each plan knows how to start itself.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use super::opts::RunOpts;
use super::prompts::{load_tokenizer, prompt_source, prompt_texts, tokenizer_flag};
use crate::engine::http::{self, HttpConfig};
use crate::engine::worker::{self, WorkerConfig};
use crate::engine::workload::{PromptSource, Workload};
use crate::event::{Control, Event, WorkloadDesc};
use crate::exit::Failure;
use crate::model::{self, DeviceSpec, ModelSpec};
use crate::telemetry;
use crate::traffic::len::LenSpec;
use crate::traffic::TrafficPlan;

/// The engine a run drives (a sweep plans one per cell; `--runs` runs one N times).
#[derive(Clone)]
pub enum EnginePlan {
    Candle(Box<WorkerConfig>),
    Http(Box<HttpConfig>),
}

impl EnginePlan {
    /// The plan as cell `cell` of a sweep runs it: a server's made-up prompts are the cell's
    /// own (`HttpConfig::prompt_salt`), so an earlier cell's prompts in the server's prefix
    /// cache serve none of them.
    pub fn in_cell(self, cell: usize) -> EnginePlan {
        match self {
            EnginePlan::Http(mut cfg) => {
                cfg.prompt_salt = cell as u64 + 1;
                EnginePlan::Http(cfg)
            }
            candle => candle,
        }
    }

    /// What the engine sends: its requests, their limit and warmup.
    pub fn traffic(&self) -> &TrafficPlan {
        match self {
            EnginePlan::Candle(w) => &w.traffic,
            EnginePlan::Http(h) => &h.traffic,
        }
    }

    /// The engine `opts` ask for, checked: candle, or the http engine with `--endpoint`.
    pub fn of(opts: &RunOpts) -> Result<EnginePlan, Failure> {
        Ok(if opts.is_server() {
            EnginePlan::Http(Box::new(plan_http(opts)?))
        } else {
            EnginePlan::Candle(Box::new(plan_candle(opts)?))
        })
    }

    /// What the telemetry thread samples: the device of the candle engine; for a server, only
    /// this process (the server's device is not ours to sample).
    pub fn telemetry_device(&self) -> telemetry::TelemetryDevice {
        match self {
            EnginePlan::Candle(w) => match w.device {
                DeviceSpec::Cpu => telemetry::TelemetryDevice::Cpu,
                DeviceSpec::Cuda(n) => telemetry::TelemetryDevice::Cuda(n),
            },
            EnginePlan::Http(_) => telemetry::TelemetryDevice::Cpu,
        }
    }

    /// The device the header's machine section describes.
    pub fn device(&self) -> DeviceSpec {
        match self {
            EnginePlan::Candle(w) => w.device,
            EnginePlan::Http(_) => DeviceSpec::Cpu,
        }
    }

    /// The workload as the engine will describe it when it starts.
    pub fn workload(&self) -> WorkloadDesc {
        match self {
            EnginePlan::Candle(w) => w.workload.describe(&w.traffic),
            EnginePlan::Http(h) => h.describe(),
        }
    }

    /// Starts the engine on its thread.
    pub fn spawn(
        self,
        fault: Option<worker::Fault>,
        events: Sender<Event>,
        control: Receiver<Control>,
    ) -> std::io::Result<JoinHandle<()>> {
        match self {
            EnginePlan::Candle(w) => worker::spawn_with_fault(*w, fault, events, control),
            EnginePlan::Http(h) => http::spawn(*h, events, control),
        }
    }
}

/// The CPU threads candle will use: `--threads`, else `RAYON_NUM_THREADS`, else every core.
pub fn candle_threads(opts: &RunOpts) -> usize {
    opts.model
        .threads
        .unwrap_or_else(candle_core::utils::get_num_threads)
}

/// `--tokenizer server`: the server's own `/tokenize` (servers only).
fn server_tokenizer(opts: &RunOpts) -> bool {
    opts.model.tokenizer.as_deref() == Some(std::path::Path::new("server"))
}

/// `--endpoint`: the http engine's configuration.
fn plan_http(opts: &RunOpts) -> Result<HttpConfig, Failure> {
    let w = &opts.workload;
    let api = opts.server.api;
    if opts.model.step_parts.is_some() {
        return Err(Failure::usage(
            "--step-parts: times the parts of the candle engine's forward; a server's own timings come with --server-metrics",
        ));
    }
    if w.batch > 1 && !(api.takes_batch() || api == http::Api::Auto) {
        return Err(Failure::usage(format!(
            "--batch {}: with --endpoint every request is one sequence (but --api embeddings and rerank, which take a batch of inputs); use --concurrency for parallel requests",
            w.batch
        )));
    }
    let api_key = match &opts.server.api_key {
        Some(k) => Some(k.expose().to_string()),
        None => std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty()),
    };
    // Made-up prompts are 128 tokens unless -p says; given texts keep their own length.
    let prompt = Some(w.prompt_tokens.clone().unwrap_or(LenSpec::Fixed(128)));
    if server_tokenizer(opts) {
        let texts = prompt_texts(w)?.map(Arc::new);
        let traffic = super::traffic::plan(opts, true, prompt, None, None)?;
        return http_config(opts, api_key, traffic, http::Prompts::Server { texts });
    }
    let tokenizer = match &opts.model.tokenizer {
        Some(path) => Some(tokenizer_flag(path)?),
        None => None,
    };
    let prompts = match prompt_texts(w)? {
        Some(texts) => http::Prompts::Texts(Arc::new(
            texts
                .into_iter()
                .map(|t| http::PromptText::new(t, tokenizer.as_ref()))
                .collect(),
        )),
        None => match (&tokenizer, &opts.model.tokenizer) {
            (Some(tk), Some(path)) => {
                let words = crate::traffic::words::PromptWords::from_tokenizer(tk).map_err(|why| {
                    Failure::usage(format!(
                        "--tokenizer {}: cannot make prompts of exact length with it ({why}); drop --tokenizer for approximate prompts",
                        path.display()
                    ))
                })?;
                http::Prompts::Words(Arc::new(words))
            }
            _ => http::Prompts::Approximate,
        },
    };
    let counted_by = match (&tokenizer, &prompts) {
        (Some(tk), _) => Some(tk),
        _ => None,
    };
    let traffic = super::traffic::plan(opts, true, prompt, counted_by, None)?;
    http_config(opts, api_key, traffic, prompts)
}

fn http_config(
    opts: &RunOpts,
    api_key: Option<String>,
    traffic: TrafficPlan,
    prompts: http::Prompts,
) -> Result<HttpConfig, Failure> {
    let (w, s) = (&opts.workload, &opts.server);
    Ok(HttpConfig {
        endpoints: s.endpoint.clone(),
        prompts,
        api: s.api,
        served_model: s.served_model.as_ref().map(|m| m.first().to_string()),
        api_key,
        traffic,
        concurrency: s.concurrency,
        rate: s.rate,
        burstiness: s.burstiness,
        request_timeout: s.request_timeout,
        exact_output: !w.stop_at_eos,
        chunk_usage: s.chunk_usage,
        chunk_timings: false,
        record_tokens: opts.output.record_tokens,
        preconnect: !s.no_preconnect,
        reset_prefix_cache: s.reset_prefix_cache,
        shape: shape(opts)?,
        start_at: None,
        prompt_salt: 0,
        cancel: cancel_plan(opts)?,
        canary: canary_plan(opts)?,
    })
}

/// `--probe`, checked against the API: a canary is a small generation.
fn canary_plan(opts: &RunOpts) -> Result<Option<http::canary::CanaryPlan>, Failure> {
    let Some(plan) = opts.server.probe else {
        return Ok(None);
    };
    if opts.server.api.takes_batch() {
        return Err(Failure::usage(format!(
            "--probe: --api {} generates nothing to time a canary by; use --api completions, chat, responses or messages",
            opts.server.api.name()
        )));
    }
    Ok(Some(plan))
}

/// `--cancel`, with where the server's metrics are read (`--server-metrics`, else each
/// endpoint's `/metrics`).
fn cancel_plan(opts: &RunOpts) -> Result<Option<http::cancel::CancelPlan>, Failure> {
    let s = &opts.server;
    let Some(plan) = &s.cancel else {
        return Ok(None);
    };
    if opts.traffic.turns.is_some() {
        return Err(Failure::usage(
            "--cancel: not with --turns (each turn of a conversation builds on the one before); cancel single requests",
        ));
    }
    let given = if s.server_metrics.is_empty() {
        vec![String::new()]
    } else {
        s.server_metrics.clone()
    };
    let mut plan = plan.clone();
    plan.metrics = super::server_metrics_urls(&given, &s.endpoint)?;
    Ok(Some(plan))
}

/// `--tools`, `--tool-choice`, `--tool-time`, weighted `--served-model` and a pooling API's
/// `--batch`, checked.
fn shape(opts: &RunOpts) -> Result<http::Shape, Failure> {
    let s = &opts.server;
    let api = s.api;
    let tools = match &s.tools {
        Some(path) => {
            if !(api.takes_messages() || api == http::Api::Auto) {
                return Err(Failure::usage(format!(
                    "--tools: --api {} has no tools; use --api chat, responses or messages",
                    api.name()
                )));
            }
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::usage(format!("--tools {}", crate::util::io_error(path, &e)))
            })?;
            let defs = crate::traffic::tools::parse_tools(&text)
                .map_err(|e| Failure::usage(format!("--tools {}: {e}", path.display())))?;
            if defs.is_empty() {
                return Err(Failure::usage(format!(
                    "--tools {}: an empty array (give at least one tool definition)",
                    path.display()
                )));
            }
            Some(Arc::new(http::Tools {
                defs,
                choice: s.tool_choice.clone(),
            }))
        }
        None => None,
    };
    if s.tool_choice.is_some() && tools.is_none() && opts.traffic.dataset.is_none() {
        return Err(Failure::usage(
            "--tool-choice: no tools to choose from; add --tools FILE (or a --dataset whose rows carry tools)",
        ));
    }
    Ok(http::Shape {
        tools,
        tool_choice: s.tool_choice.clone(),
        extra: Arc::new(http::extra::Extra {
            body: s.extra_body.clone(),
            headers: s.headers.clone(),
        }),
        tool_time: opts.traffic.tool_time,
        models: match &s.served_model {
            Some(m) if m.models.len() > 1 => m.models.clone(),
            _ => Vec::new(),
        },
        batch: opts.workload.batch,
        api_picked: None,
        pass: None,
    })
}

/// The candle engine's configuration: the model, checked without loading its weights.
fn plan_candle(opts: &RunOpts) -> Result<WorkerConfig, Failure> {
    let w = &opts.workload;
    let spec = ModelSpec::parse(&opts.model.model, w.seed).map_err(Failure::usage)?;
    if server_tokenizer(opts) {
        return Err(Failure::usage(
            "--tokenizer server: only with --endpoint (a model of infertop's own has its tokenizer; or give a tokenizer.json)",
        ));
    }
    let device = opts.model.device;
    let dtype = opts
        .model
        .dtype
        .map(model::candle_dtype)
        .unwrap_or_else(|| device.default_dtype());
    let batch = w.batch;

    // The model's shape (without loading weights) for up-front checks.
    let arch = model::arch_config_of(&spec).map_err(|e| Failure::usage(e.to_string()))?;
    if let (Some(cfg), ModelSpec::HfDir(dir)) = (&arch, &spec) {
        cfg.check_supported()
            .map_err(|m| Failure::usage(format!("{}: {m}", dir.join("config.json").display())))?;
        // Map the files and check every tensor's name, shape and dtype now, so a broken download
        // is a one-line error before the dashboard starts (mapping reads only the headers).
        let files = model::hf::weight_files(dir).map_err(|e| Failure::usage(e.to_string()))?;
        model::hf::open_checked(cfg, &files).map_err(|e| Failure::usage(e.to_string()))?;
    }
    if let ModelSpec::Gguf(path) = &spec {
        model::gguf::check_header(path).map_err(|e| Failure::usage(e.to_string()))?;
        if batch > 1 {
            // candle's quantized llama/qwen2 take the last position of a (batch, seq) activation as a
            // strided view that its quantized matmul rejects ("input tensor is not contiguous").
            return Err(Failure::usage(format!(
                "--batch {batch}: candle's quantized (GGUF) models run batch 1 only; use --batch 1, or a Hugging Face directory for batched runs"
            )));
        }
    }

    // Prompts.
    let record_tokens = opts.output.record_tokens;
    let t = &opts.traffic;
    let wants_traffic = t.dataset.is_some() || t.shared_prefix.is_some() || t.turns.is_some();
    let tokenizer = if w.has_text() || record_tokens || t.dataset.is_some() {
        Some(load_tokenizer(
            &spec,
            arch.as_ref(),
            opts.model.tokenizer.as_deref(),
        )?)
    } else {
        None
    };
    let source = prompt_source(w, tokenizer.as_ref())?;
    let prompt_len = match (&source, &w.prompt_tokens) {
        (PromptSource::Synthetic, None) => Some(LenSpec::Fixed(128)),
        (_, p) => p.clone(),
    };
    let max = arch.as_ref().map(|c| c.max_position_embeddings);
    let traffic = if wants_traffic {
        super::traffic::plan(opts, false, prompt_len, tokenizer.as_ref(), max)?
    } else {
        TrafficPlan {
            prompt: prompt_len,
            output: w.output_tokens.clone(),
            seed: w.seed,
            warmup: w.warmup,
            requests: w.requests,
            duration: w.duration,
            source: None,
            conversations: None,
            replay: None,
            shard: crate::traffic::Shard::WHOLE,
        }
    };
    let workload = Workload {
        batch,
        source,
        vocab: arch.as_ref().map(|c| c.vocab_size).unwrap_or(32000),
        tokenizer: tokenizer
            .clone()
            .filter(|_| t.dataset.is_some())
            .map(Arc::new),
    };
    if let Some(cfg) = &arch {
        let needed = workload.max_positions_needed(&traffic);
        if needed > cfg.max_position_embeddings {
            return Err(Failure::usage(format!(
                "prompt + output tokens ({needed}) exceed the model's {} positions; lower --prompt-tokens or --output-tokens",
                cfg.max_position_embeddings
            )));
        }
    }

    Ok(WorkerConfig {
        model: spec,
        device,
        dtype,
        threads: candle_threads(opts),
        traffic,
        workload,
        stop_at_eos: w.stop_at_eos,
        record_tokens,
        tokenizer: if record_tokens { tokenizer } else { None },
        sampling: w.sampling.clone(),
        step_parts: opts.model.step_parts.map(|n| n.min(u32::MAX as u64) as u32),
    })
}
