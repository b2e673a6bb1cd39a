//! The end-of-run summary every mode prints (a run, `replay`, `follow`, `report`, a sweep's
//! cells): one table, printed as markdown, JSON or CSV, with the run's peak memory and energy
//! (`resources`). The fold (`fold::RunFold`) makes it; the record keeps it in its footer.

pub mod resources;

use serde::{Deserialize, Serialize};

use crate::event::ServerQuantiles;
use crate::util::table::{or_missing, TextTable};

use crate::stats::{
    EndpointSummary, Metric, ModelSummary, Part, PhaseSummary, RunStats, ServerSpanSummary,
    ShapeSummary, SpecSummary, SplitSummary, Summary, Table, WindowKind,
};

/// `--format` of runs and `report`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SummaryFormat {
    /// A markdown table (the default).
    #[default]
    #[value(alias = "markdown")]
    Md,
    /// One JSON object.
    Json,
    /// One row per window and metric.
    Csv,
}

/// What a run measured: steady-state table, warmup table, counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Requests finished (warmup included).
    pub requests: u64,
    pub warmup_requests: u64,
    /// Steady-state metrics (warmup excluded).
    pub steady: Table,
    /// The warmup requests alone.
    pub warmup: Table,
    /// Peak memory and energy over the whole run.
    #[serde(default)]
    pub resources: resources::Resources,
    /// Requests that failed (a server engine: refused, HTTP error, cut stream, timeout); they
    /// are in no latency statistic. Not reset by `r`.
    #[serde(default)]
    pub failed_requests: u64,
    /// Requests the client cancelled on purpose (`--cancel`): in no statistic, not failures.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cancelled_requests: u64,
    /// What the server did after the cancellations, when the run checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_check: Option<crate::event::CancelCheck>,
    /// A server run's figures per endpoint (empty for the candle engine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointSummary>,
    /// Every figure per model, when the run sent to several (`--served-model a=3,b=1`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelSummary>,
    /// Thinking and answering apart and the tool calls, when the output had either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ShapeSummary>,
    /// The server's own histograms over the steady state (`--server-metrics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSpanSummary>,
    /// Steady TTFT by cache outcome and by turn, and the length distributions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<crate::stats::BreakdownSummary>,
    /// The candle engine's sampled steps in parts (`--step-parts N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_parts: Option<crate::stats::StepPartsSummary>,
    /// A server run's HTTP phases and time to second token (`to_json` writes them as
    /// `http_phases`).
    #[serde(skip)]
    pub phases: Option<PhaseSummary>,
    /// Goodput against the run's SLO, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<GoodputSummary>,
    /// Where the TTFT went by the server's own timings (`to_json` writes it as
    /// `ttft_split`), when the server sent them.
    #[serde(skip)]
    pub split: Option<SplitSummary>,
    /// The canary lane's requests (`--probe`), apart from the run's (`to_json` writes it as
    /// `canary`).
    #[serde(skip)]
    pub canary: Option<crate::stats::CanarySummary>,
    /// Speculative decoding by the server's own count (`to_json` writes it as
    /// `speculative_decoding`), when it drafted.
    #[serde(skip)]
    pub spec: Option<SpecSummary>,
}

/// Steady requests against an SLO: met, missed, failed (a miss), and the share met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GoodputSummary {
    pub slo: crate::stats::Slo,
    #[serde(flatten)]
    pub counts: crate::stats::SloCounts,
}

impl GoodputSummary {
    /// `goodput 97.2% of 312 (ttft:p95≤500ms e2e≤10s)` as the summary's and the dashboard's
    /// line says it.
    pub fn words(&self, le: &str, duration: impl Fn(f64) -> String) -> String {
        let share = self
            .counts
            .share()
            .map_or("-".into(), |s| format!("{:.1}%", s * 100.0));
        format!(
            "goodput {share} of {} ({})",
            self.counts.requests(),
            self.slo.words(le, duration)
        )
    }
}

impl RunSummary {
    pub fn from_stats(stats: &RunStats) -> RunSummary {
        RunSummary {
            requests: stats.requests(),
            warmup_requests: stats.warmup_requests(),
            steady: stats.table(WindowKind::Steady, false),
            warmup: stats.warmup_table(),
            resources: Default::default(),
            failed_requests: 0,
            cancelled_requests: 0,
            cancel_check: None,
            endpoints: Vec::new(),
            models: Vec::new(),
            reasoning: None,
            server: None,
            breakdown: None,
            step_parts: None,
            phases: None,
            goodput: None,
            split: None,
            spec: None,
            canary: None,
        }
    }

    /// The summary with the canary lane's figures.
    pub fn with_canary(mut self, canary: Option<crate::stats::CanarySummary>) -> RunSummary {
        self.canary = canary;
        self
    }

    /// The summary with goodput against the run's SLO.
    pub fn with_goodput(mut self, goodput: Option<GoodputSummary>) -> RunSummary {
        self.goodput = goodput;
        self
    }

    /// The summary with the server's own view beside the client's.
    pub fn with_server(mut self, server: Option<ServerSpanSummary>) -> RunSummary {
        self.server = server;
        self
    }

    /// The summary with the requests cancelled on purpose and what the server did after.
    pub fn with_cancelled(
        mut self,
        cancelled: u64,
        check: Option<crate::event::CancelCheck>,
    ) -> RunSummary {
        self.cancelled_requests = cancelled;
        self.cancel_check = check;
        self
    }

    /// The summary with the number of failed requests.
    pub fn with_failures(mut self, failed_requests: u64) -> RunSummary {
        self.failed_requests = failed_requests;
        self
    }

    /// The summary with the run's memory and energy figures.
    pub fn with_resources(mut self, resources: resources::Resources) -> RunSummary {
        self.resources = resources;
        self
    }

    /// `{"type":"summary","requests":…,"warmup_requests":…,"metrics":{…},"warmup":{…}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let metrics = |t: &Table| {
            let mut m = serde_json::Map::new();
            for &metric in &Metric::ALL {
                let s = t.get(metric);
                m.insert(metric.key().to_string(), summary_json(&s));
            }
            serde_json::Value::Object(m)
        };
        let mut out = serde_json::json!({
            "type": "summary",
            "requests": self.requests,
            "warmup_requests": self.warmup_requests,
            "window": "steady",
            "metrics": metrics(&self.steady),
            "warmup": metrics(&self.warmup),
            "resources": self.resources,
            "failed_requests": self.failed_requests,
        });
        if self.cancelled_requests > 0 {
            out["cancelled_requests"] = self.cancelled_requests.into();
        }
        if let Some(c) = &self.cancel_check {
            out["after_cancellation"] = serde_json::to_value(c).unwrap_or_default();
            out["after_cancellation"]["leaked"] = c.leaked().into();
        }
        if !self.endpoints.is_empty() {
            out["endpoints"] = self
                .endpoints
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "endpoint": e.endpoint, "requests": e.requests, "failed": e.failed,
                        "ttft_s": summary_json(&e.ttft_s), "tpot_s": summary_json(&e.tpot_s),
                        "e2e_s": summary_json(&e.e2e_s),
                    })
                })
                .collect();
        }
        if !self.models.is_empty() {
            out["models"] = self
                .models
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "model": m.model, "requests": m.requests, "failed": m.failed,
                        "output_tokens": m.output_tokens,
                        "ttft_s": summary_json(&m.ttft_s), "tpot_s": summary_json(&m.tpot_s),
                        "itl_s": summary_json(&m.itl_s), "e2e_s": summary_json(&m.e2e_s),
                        "ttfa_s": summary_json(&m.ttfa_s),
                    })
                })
                .collect();
        }
        if let Some(r) = &self.reasoning {
            out["reasoning"] = serde_json::json!({
                "requests": r.requests,
                "reasoning_requests": r.reasoning_requests,
                "reasoning_tokens_from_usage": r.reasoning_tokens_from_usage,
                "tool_call_requests": r.tool_call_requests,
                "ended_in_tool_call": r.ended_in_tool_call,
                "no_answer": r.no_answer,
                "ttfa_s": summary_json(&r.ttfa_s),
                "reasoning_s": summary_json(&r.reasoning_s),
                "answer_s": summary_json(&r.answer_s),
                "reasoning_tokens": summary_json(&r.reasoning_tokens),
            });
        }
        if let Some(srv) = &self.server {
            out["server"] = serde_json::to_value(srv).unwrap_or_default();
        }
        if let Some(b) = &self.breakdown {
            out["breakdown"] = serde_json::to_value(b).unwrap_or_default();
        }
        if let Some(p) = &self.step_parts {
            out["step_parts"] = serde_json::to_value(p).unwrap_or_default();
        }
        if let Some(p) = &self.phases {
            let mut m = serde_json::Map::new();
            m.insert(
                "connections".into(),
                serde_json::to_value(p.connections).unwrap_or_default(),
            );
            for (phase, s) in &p.rows {
                m.insert(phase.key().into(), summary_json(s));
            }
            out["http_phases"] = serde_json::Value::Object(m);
        }
        if let Some(g) = &self.goodput {
            out["goodput"] = serde_json::json!({
                "slo": g.slo,
                "met": g.counts.met,
                "missed": g.counts.missed,
                "failed": g.counts.failed,
                "share": g.counts.share(),
            });
        }
        if let Some(split) = &self.split {
            out["ttft_split"] = split.to_json();
        }
        if let Some(spec) = &self.spec {
            out["speculative_decoding"] = spec.to_json();
        }
        if let Some(c) = &self.canary {
            out["canary"] = c.to_json();
        }
        out
    }

    pub fn render(&self, format: SummaryFormat) -> String {
        match format {
            SummaryFormat::Json => self.to_json().to_string() + "\n",
            SummaryFormat::Csv => self.to_csv(),
            SummaryFormat::Md => self.to_markdown(),
        }
    }

    fn to_markdown(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "\n{} requests ({} warmup, excluded below)\n",
            self.requests, self.warmup_requests
        ));
        if self.failed_requests > 0 {
            let ended = self.failed_requests + self.requests;
            out.push_str(&format!(
                "{} failed of {ended} ({:.1}% errors), in no statistic below\n",
                self.failed_requests,
                100.0 * self.failed_requests as f64 / ended as f64
            ));
        }
        if self.cancelled_requests > 0 {
            out.push_str(&format!(
                "{} cancelled on purpose (--cancel), in no statistic below\n",
                self.cancelled_requests
            ));
        }
        if let Some(c) = &self.cancel_check {
            out.push_str(&format!("after the cancellations: {}\n", c.words()));
        }
        out.push('\n');
        let mut t = stat_table("metric");
        for &m in &Metric::ALL {
            t.row(stat_row(m.label(), m, &self.steady.get(m)));
        }
        if self.warmup_requests > 0 {
            for m in [Metric::Ttft, Metric::E2e] {
                let label = format!("{} (warmup)", m.label());
                t.row(stat_row(&label, m, &self.warmup.get(m)));
            }
        }
        out.push_str(&t.markdown());
        if let Some(g) = &self.goodput {
            out.push_str(&format!(
                "\nGoodput: {} met the SLO, {} missed it, {} failed (a miss), of {} steady requests that ended ({})\n",
                g.counts.met,
                g.counts.missed,
                g.counts.failed,
                g.counts.requests(),
                g.words("≤", crate::util::format::ms)
            ));
        }
        out.push_str(&self.resources.markdown());
        out.push_str(&self.reasoning_markdown());
        out.push_str(&self.models_markdown());
        out.push_str(&self.endpoints_markdown());
        out.push_str(&self.phases_markdown());
        if let Some(split) = &self.split {
            out.push_str(&split_markdown(split));
        }
        if let Some(spec) = &self.spec {
            out.push_str(&spec_markdown(spec));
        }
        if let Some(c) = &self.canary {
            out.push_str(&canary_markdown(c));
        }
        out.push_str(&self.server_markdown());
        if let Some(b) = &self.breakdown {
            out.push_str(&b.markdown());
        }
        if let Some(p) = &self.step_parts {
            out.push_str("\nwhere a step's time goes (--step-parts; steady steps, mean):\n\n");
            out.push_str(&p.markdown());
        }
        out
    }

    /// Where a server run's time went before the first token: the connections, and each
    /// phase's percentiles (rows without samples are left out, e.g. TLS over http).
    fn phases_markdown(&self) -> String {
        let Some(p) = &self.phases else {
            return String::new();
        };
        let c = p.connections;
        let mut out = format!(
            "\nHTTP phases (steady requests): {} on kept connections, {} on preopened ones, {} opened their own while timed (their connect is in their TTFT)\n\n",
            c.reused, c.preopened, c.new
        );
        let mut t = TextTable::new()
            .left(["phase"])
            .right(["p50", "p90", "p99", "max", "n"])
            .left(["what"]);
        let f = |v: f64| format_value(Metric::Ttft, v);
        for (phase, s) in p.rows.iter().filter(|(_, s)| s.n > 0) {
            t.row([
                phase.label().to_string(),
                f(s.p50),
                f(s.p90),
                f(s.p99),
                f(s.max),
                s.n.to_string(),
                phase.meaning().to_string(),
            ]);
        }
        out.push_str(&t.markdown());
        out
    }

    /// The client's percentiles beside the server's own (`--server-metrics`): the difference
    /// is the network and whatever queueing the server does not count.
    fn server_markdown(&self) -> String {
        let Some(srv) = &self.server else {
            return String::new();
        };
        let mut out = format!(
            "\nthe server's own view: {} histograms over {} windows ({:.0} s) after warmup, {} requests, {} preemptions (histogram_quantile: as fine as its buckets)\n\n",
            srv.server, srv.windows, srv.seconds, srv.requests, srv.preemptions
        );
        let mut t = TextTable::new().left(["metric"]).right([
            "client p50",
            "server p50",
            "client − server",
            "client p99",
            "server p99",
            "client − server",
            "n client / server",
        ]);
        for (m, q) in server_pairs(srv) {
            let c = self.steady.get(m);
            let cell = |v: Option<f64>| or_missing(v.map(|v| format_value(m, v)));
            let client = |v: f64| (c.n > 0).then_some(v);
            let gap = |a: Option<f64>, b: Option<f64>| {
                or_missing(a.zip(b).map(|(a, b)| format!("{:+.3} ms", (a - b) * 1e3)))
            };
            let (s50, s99) = (q.map(|q| q.p50), q.map(|q| q.p99));
            t.row([
                m.label().to_string(),
                cell(client(c.p50)),
                cell(s50),
                gap(client(c.p50), s50),
                cell(client(c.p99)),
                cell(s99),
                gap(client(c.p99), s99),
                format!("{} / {}", c.n, q.map_or(0, |q| q.n)),
            ]);
        }
        out.push_str(&t.markdown());
        out
    }

    /// Thinking and answering apart: TTFT (any token) beside TTFA (the first answer token),
    /// the reasoning's time and tokens, the answer's time, and the tool calls.
    fn reasoning_markdown(&self) -> String {
        let Some(r) = &self.reasoning else {
            return String::new();
        };
        let from = if r.reasoning_tokens_from_usage == r.reasoning_requests {
            "the server's counts"
        } else if r.reasoning_tokens_from_usage == 0 {
            "counted from the stream"
        } else {
            "the server's counts where it gave them, else counted from the stream"
        };
        let mut out = format!(
            "\nthinking and answering (steady requests): {} of {} reasoned (tokens: {from}), {} made tool calls, {} ended in a tool call, {} never answered\n\n",
            r.reasoning_requests, r.requests, r.tool_call_requests, r.ended_in_tool_call, r.no_answer
        );
        let mut t = stat_table("metric");
        let ttft = self.steady.get(Metric::Ttft);
        for (label, m, s) in [
            ("TTFT (any token)", Metric::Ttft, &ttft),
            ("TTFA (first answer)", Metric::Ttft, &r.ttfa_s),
            ("reasoning time", Metric::Ttft, &r.reasoning_s),
            ("answer time", Metric::Ttft, &r.answer_s),
            ("reasoning tokens", Metric::PrefillTokS, &r.reasoning_tokens),
        ] {
            t.row(stat_row(label, m, s));
        }
        out.push_str(&t.markdown());
        out
    }

    /// Per model, when requests went to more than one, with n.
    fn models_markdown(&self) -> String {
        if self.models.is_empty() {
            return String::new();
        }
        let mut t = TextTable::new().left(["model"]).right([
            "n",
            "failed",
            "out tokens",
            "TTFT p50",
            "TTFT p99",
            "TTFA p50",
            "TPOT p50",
            "TPOT p99",
            "ITL p50",
            "ITL p99",
            "E2E p50",
            "E2E p99",
        ]);
        for m in &self.models {
            t.row([
                m.model.clone(),
                m.requests.to_string(),
                m.failed.to_string(),
                m.output_tokens.to_string(),
                ms_of(&m.ttft_s, m.ttft_s.p50),
                ms_of(&m.ttft_s, m.ttft_s.p99),
                ms_of(&m.ttfa_s, m.ttfa_s.p50),
                ms_of(&m.tpot_s, m.tpot_s.p50),
                ms_of(&m.tpot_s, m.tpot_s.p99),
                ms_of(&m.itl_s, m.itl_s.p50),
                ms_of(&m.itl_s, m.itl_s.p99),
                ms_of(&m.e2e_s, m.e2e_s.p50),
                ms_of(&m.e2e_s, m.e2e_s.p99),
            ]);
        }
        format!("\n{}", t.markdown())
    }

    /// Per endpoint, when requests went to more than one (one endpoint is the table above).
    fn endpoints_markdown(&self) -> String {
        if self.endpoints.len() < 2 {
            return String::new();
        }
        let mut t = TextTable::new().left(["endpoint"]).right([
            "n", "failed", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50", "E2E p99",
        ]);
        for e in &self.endpoints {
            t.row([
                e.endpoint.clone(),
                e.requests.to_string(),
                e.failed.to_string(),
                ms_of(&e.ttft_s, e.ttft_s.p50),
                ms_of(&e.ttft_s, e.ttft_s.p99),
                ms_of(&e.tpot_s, e.tpot_s.p50),
                ms_of(&e.tpot_s, e.tpot_s.p99),
                ms_of(&e.e2e_s, e.e2e_s.p50),
                ms_of(&e.e2e_s, e.e2e_s.p99),
            ]);
        }
        format!("\n{}", t.markdown())
    }

    fn to_csv(&self) -> String {
        let row = |window: &str, metric: &str, s: &Summary| {
            [
                window.to_string(),
                metric.to_string(),
                s.mean.to_string(),
                s.p50.to_string(),
                s.p90.to_string(),
                s.p95.to_string(),
                s.p99.to_string(),
                s.max.to_string(),
                s.n.to_string(),
            ]
        };
        let mut rows = vec![[
            "window", "metric", "mean", "p50", "p90", "p95", "p99", "max", "n",
        ]
        .map(String::from)];
        for (window, table) in [("steady", &self.steady), ("warmup", &self.warmup)] {
            for &m in &Metric::ALL {
                rows.push(row(window, m.key(), &table.get(m)));
            }
        }
        if self.endpoints.len() >= 2 {
            for e in &self.endpoints {
                for (key, s) in [
                    ("ttft_s", &e.ttft_s),
                    ("tpot_s", &e.tpot_s),
                    ("e2e_s", &e.e2e_s),
                ] {
                    rows.push(row(&format!("endpoint={}", e.endpoint), key, s));
                }
            }
        }
        for m in &self.models {
            for (key, s) in [
                ("ttft_s", &m.ttft_s),
                ("ttfa_s", &m.ttfa_s),
                ("tpot_s", &m.tpot_s),
                ("itl_s", &m.itl_s),
                ("e2e_s", &m.e2e_s),
            ] {
                rows.push(row(&format!("model={}", m.model), key, s));
            }
        }
        if let Some(r) = &self.reasoning {
            for (key, s) in [
                ("ttfa_s", &r.ttfa_s),
                ("reasoning_s", &r.reasoning_s),
                ("answer_s", &r.answer_s),
                ("reasoning_tokens", &r.reasoning_tokens),
            ] {
                rows.push(row("reasoning", key, s));
            }
        }
        if let Some(p) = &self.phases {
            for (phase, s) in &p.rows {
                rows.push(row("http", phase.key(), s));
            }
        }
        if let Some(split) = &self.split {
            rows.push(row("split", "ttft_s", &split.ttft));
            for p in Part::ALL {
                rows.push(row("split", p.key(), &split.get(p)));
            }
        }
        if let Some(spec) = &self.spec {
            rows.push(row("spec", "acceptance", &spec.acceptance));
            rows.push(row("spec", "accepted_per_step", &spec.accepted_per_step));
            for b in &spec.tpot_by_acceptance {
                rows.push(row("spec", &format!("tpot_s@{}", b.label), &b.tpot));
            }
        }
        if let Some(srv) = &self.server {
            // The server's histograms have no mean, p95 or max.
            for (m, q) in server_pairs(srv) {
                if let Some(q) = q {
                    rows.push(
                        [
                            "server",
                            m.key(),
                            "",
                            &q.p50.to_string(),
                            &q.p90.to_string(),
                            "",
                            &q.p99.to_string(),
                            "",
                            &q.n.to_string(),
                        ]
                        .map(String::from),
                    );
                }
            }
        }
        crate::util::csv_text(rows)
    }
}

/// Where the TTFT went, by the server's own timings: each part's percentiles, its share of
/// the TTFT's median, and how it moves with the requests in flight.
pub fn split_markdown(split: &SplitSummary) -> String {
    let mut out = format!(
        "\nwhere the TTFT went, by the server's own timings ({}; {} steady requests; prompt tokens {} cached, {} computed)\n\n",
        split.source, split.requests, split.cached_tokens, split.computed_tokens
    );
    let mut table = TextTable::new()
        .left(["part"])
        .right([
            "p50",
            "p90",
            "p99",
            "max",
            "n",
            "of TTFT p50",
            "per request in flight",
        ])
        .left(["what"]);
    let figures = |s: &Summary| {
        let f = |v: f64| or_missing((s.n > 0).then(|| format_value(Metric::Ttft, v)));
        [f(s.p50), f(s.p90), f(s.p99), f(s.max), s.n.to_string()]
    };
    let t = split.ttft;
    if t.n > 0 {
        let mut row = vec!["TTFT".to_string()];
        row.extend(figures(&t));
        row.extend(["100%", "", "the client's, of these requests"].map(String::from));
        table.row(row);
    }
    for p in Part::ALL {
        let s = split.get(p);
        let mut row = vec![p.label().to_string()];
        row.extend(figures(&s));
        if s.n == 0 {
            row.extend(["", "", "not sent by this server"].map(String::from));
            table.row(row);
            continue;
        }
        let share = match (p, split.share(p)) {
            (Part::Decode, _) | (_, None) => String::new(),
            (_, Some(x)) => format!("{:.0}%", 100.0 * x),
        };
        let slope = split
            .slope_s_per_request
            .iter()
            .find(|(q, _)| *q == p)
            .and_then(|(_, s)| *s)
            .map_or(String::new(), |s| format!("{:+.3} ms", s * 1e3));
        row.extend([share, slope, p.meaning().to_string()]);
        table.row(row);
    }
    out.push_str(&table.markdown());
    match split.grows {
        Some(p) => out.push_str(&format!(
            "\nthe part that grows with the load: {} (the steepest rise per request in flight)\n",
            p.label()
        )),
        None => out.push_str(
            "\nno part fitted against the load (it did not vary; a sweep's cells compare levels)\n",
        ),
    }
    out
}

/// The canary lane: its small requests' latency beside the run's, which it is not part of.
pub fn canary_markdown(c: &crate::stats::CanarySummary) -> String {
    let mut out = format!(
        "\ncanary lane (--probe; in no figure above): {} completed, {} failed{}\n\n",
        c.completed,
        c.failed,
        c.last_error
            .as_ref()
            .map_or(String::new(), |e| format!(" (last: {e})"))
    );
    let mut t = stat_table("canary");
    for (label, m, s) in [
        ("TTFT", Metric::Ttft, &c.ttft),
        ("TPOT", Metric::Tpot, &c.tpot),
        ("E2E", Metric::E2e, &c.e2e),
    ] {
        t.row(stat_row(label, m, s));
    }
    out.push_str(&t.markdown());
    out
}

/// Speculative decoding as the server counted it: each request's acceptance and accepted
/// tokens per verify step with their percentiles, and the TPOT by band of acceptance.
pub fn spec_markdown(spec: &SpecSummary) -> String {
    let pct = |v: f64| format!("{:.1}%", 100.0 * v);
    let num = |v: f64| format!("{v:.2}");
    let mut out = format!(
        "\nspeculative decoding, as the server counted it ({}; {} steady requests, {} of them drafted nothing): {} of {} drafted tokens accepted",
        spec.source, spec.requests, spec.undrafted, spec.accepted, spec.drafted
    );
    if let Some(a) = spec.token_acceptance() {
        out.push_str(&format!(" ({})", pct(a)));
    }
    if let Some(a) = spec.mean_accepted_per_step() {
        out.push_str(&format!(
            "; {} verify steps, {} accepted a step ({} tokens a step)",
            spec.steps,
            num(a),
            num(a + 1.0)
        ));
    }
    let mut t = TextTable::new()
        .left(["per request"])
        .right(["mean", "p50", "p90", "p99", "max", "n"]);
    let row = |label: &str, s: &Summary, f: &dyn Fn(f64) -> String| {
        let mut row = vec![label.to_string()];
        row.extend(
            [s.mean, s.p50, s.p90, s.p99, s.max].map(|v| or_missing((s.n > 0).then(|| f(v)))),
        );
        row.push(s.n.to_string());
        row
    };
    t.row(row(
        "acceptance (accepted / drafted)",
        &spec.acceptance,
        &pct,
    ));
    // llama.cpp counts its verify steps only server-wide (`/metrics`): no row.
    if spec.accepted_per_step.n > 0 {
        t.row(row(
            "accepted per verify step",
            &spec.accepted_per_step,
            &num,
        ));
    }
    out.push_str("\n\n");
    out.push_str(&t.markdown());
    let ms = |v: f64| format_value(Metric::Tpot, v);
    out.push_str("\nTPOT by acceptance (each request's accepted / drafted)\n\n");
    let mut bands = TextTable::new()
        .left(["acceptance"])
        .right(["TPOT p50", "TPOT p90", "TPOT p99", "n"]);
    for b in &spec.tpot_by_acceptance {
        let t = &b.tpot;
        let f = |v: f64| or_missing((t.n > 0).then(|| ms(v)));
        bands.row([
            b.label.to_string(),
            f(t.p50),
            f(t.p90),
            f(t.p99),
            t.n.to_string(),
        ]);
    }
    out.push_str(&bands.markdown());
    match spec.tpot_correlation {
        Some(r) => out.push_str(&format!(
            "\nTPOT against acceptance: Pearson's r = {r:+.2} ({})\n",
            if r < 0.0 {
                "the more a request had accepted, the faster its tokens"
            } else {
                "no speed-up from acceptance"
            }
        )),
        None => out.push_str(&format!(
            "\nTPOT against acceptance: too few requests, or no spread, for a correlation (at least {})\n",
            crate::stats::spec::MIN_CORRELATED
        )),
    }
    out
}

/// The client's metrics that a server's histograms also measure, with the server's figures.
pub fn server_pairs(srv: &ServerSpanSummary) -> [(Metric, Option<ServerQuantiles>); 3] {
    [
        (Metric::Ttft, srv.ttft_s),
        (Metric::Itl, srv.itl_s),
        (Metric::E2e, srv.e2e_s),
    ]
}

/// A summary as JSON: its figures, or `null`s with `n: 0` when it has no samples.
pub(crate) fn summary_json(s: &Summary) -> serde_json::Value {
    if s.n == 0 {
        return serde_json::json!({"mean": null, "p50": null, "p90": null, "p95": null, "p99": null, "max": null, "n": 0});
    }
    serde_json::json!({
        "mean": s.mean, "p50": s.p50, "p90": s.p90, "p95": s.p95, "p99": s.p99, "max": s.max, "n": s.n
    })
}

/// The table of a statistic's mean, percentiles, max and n, first column `first`.
fn stat_table(first: &str) -> TextTable {
    TextTable::new()
        .left([first])
        .right(["mean", "p50", "p90", "p95", "p99", "max", "n"])
}

/// A `stat_table` row: every figure missing when there are no samples.
fn stat_row(label: &str, m: Metric, s: &Summary) -> Vec<String> {
    let f = |v: f64| (s.n > 0).then(|| format_value(m, v));
    let mut row = vec![label.to_string()];
    row.extend([s.mean, s.p50, s.p90, s.p95, s.p99, s.max].map(|v| or_missing(f(v))));
    row.push(s.n.to_string());
    row
}

/// A latency of a per-model or per-endpoint statistic, missing when it has no samples.
fn ms_of(s: &Summary, v: f64) -> String {
    or_missing((s.n > 0).then(|| format_value(Metric::Ttft, v)))
}

/// A value in a report table: latencies as `util::format::ms` (`12.345 ms`), rates in full to
/// one decimal (`12345.6`: a report's columns are compared run to run, to more digits than the
/// dashboard's three).
pub fn format_value(m: Metric, v: f64) -> String {
    if m.is_latency() {
        crate::util::format::ms(v)
    } else {
        format!("{v:.1}")
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::stats::EndpointSummary;

    /// Endpoint URLs with a comma and a quote go into the CSV quoted, and read back whole.
    #[test]
    fn csv_endpoint_urls_with_commas_and_quotes_read_back_whole() {
        let urls = [r#"http://h:1/v1?a=1,b="2""#, "http://plain:2"];
        let summary = RunSummary {
            endpoints: urls
                .iter()
                .map(|u| EndpointSummary {
                    endpoint: u.to_string(),
                    requests: 2,
                    failed: 0,
                    ttft_s: Summary::of(&[0.1, 0.2]),
                    tpot_s: Summary::default(),
                    e2e_s: Summary::default(),
                })
                .collect(),
            ..RunSummary::default()
        };
        let text = summary.render(SummaryFormat::Csv);
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let windows: Vec<String> = r
            .records()
            .map(|row| row.unwrap().get(0).unwrap().to_string())
            .collect();
        for u in urls {
            assert_eq!(
                windows
                    .iter()
                    .filter(|w| **w == format!("endpoint={u}"))
                    .count(),
                3,
                "{text}"
            );
        }
    }
}
