//! Where a step's time goes inside the model's forward, read from the tracing spans that
//! candle-transformers' models already enter (`attn`, `attn-rot`, `mlp` or `attn-mlp`,
//! `output`, `embedding`, `rms-norm`, `linear`, `qmatmul`, ...), so no model is written twice.
//!
//! A `Spans` subscriber is installed for the process before any model is built (a span made
//! with no subscriber stays disabled for good). It keeps nothing and does nothing until a
//! thread opens a sample (`begin`): then every span that thread enters and leaves is stamped,
//! until `end` closes the sample; its sums per part are read from the stamps. Outside a
//! sample a span's enter and exit cost one thread-local flag read each; the sampled step pays
//! two clock reads per span, which is why only one step in N is sampled.
//!
//! On CPU candle's ops run to completion on the calling thread (each op may fan out to the
//! thread pool, but returns when done), so a span's wall time is the time of its ops. On CUDA
//! they only queue kernels on candle's stream, so every enter and exit records an event there
//! instead (`Clock`; `engine::timer::parts_clock`) and the times are read after the step's
//! synchronize (`Pending::resolve`): sampling a step never makes the host wait for the GPU. Nested
//! spans (`attn-rot` inside `attn`, `qmatmul` inside both) are kept apart: `Sample::parts` is
//! inclusive, and the grouping into the parts of a step is `Sample::grouped`'s.
//!
//! candle-transformers' dense Qwen2, Qwen3, Mistral, Phi-3, Mixtral and Qwen3-MoE enter no
//! `attn` or `mlp` span, only `rms-norm` (and `linear`), and its dense Llama no span for its
//! head. They are pre-norm transformers, so their norms mark the parts: a layer's input norm
//! opens its attention, its post-attention norm closes the attention and opens the MLP, the
//! next layer's input norm closes the MLP, and what follows the final norm is the LM head.
//! For these models the sample is opened with the number of norms per layer (`Norms`); the
//! time between those boundaries goes to attention, MLP and head where no span of the model's
//! own timed that part. The norms themselves stay in the rest.

use std::cell::RefCell;
use std::time::Instant;

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::model::arch::Norms;

/// A span's part of a forward. The names are candle-transformers' span names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// `embedding`: the token embedding lookup.
    Embedding,
    /// `attn`: one layer's attention, projections and rotary embedding included.
    Attention,
    /// `attn-rot`, `rot`: the rotary embedding (inside `attn`).
    Rope,
    /// `mlp`, `attn-mlp`: one layer's feed-forward block.
    Mlp,
    /// `rms-norm`, `layer-norm`: a norm, where the model traces its norms.
    Norm,
    /// `output`: the LM head (the final norm before it is outside the span).
    Output,
    /// `linear`, `qmatmul`: a weight matmul, inside whichever part called it.
    Matmul,
    /// `model`, `block`: a whole forward or a whole layer (kept to check the others against).
    Whole,
}

const PARTS: usize = 8;

impl Part {
    /// The part a candle span name stands for; `None` for names no model here uses.
    pub fn of(name: &str) -> Option<Part> {
        Some(match name {
            "embedding" => Part::Embedding,
            "attn" => Part::Attention,
            "attn-rot" | "rot" => Part::Rope,
            "mlp" | "attn-mlp" => Part::Mlp,
            "rms-norm" | "layer-norm" => Part::Norm,
            "output" => Part::Output,
            "linear" | "qmatmul" => Part::Matmul,
            "model" | "block" => Part::Whole,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Part::Embedding => "embedding",
            Part::Attention => "attention",
            Part::Rope => "rope",
            Part::Mlp => "mlp",
            Part::Norm => "norm",
            Part::Output => "lm head",
            Part::Matmul => "weight matmuls",
            Part::Whole => "whole",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn from_id(id: &Id) -> Option<Part> {
        ALL.get((id.into_u64() as usize).checked_sub(1)?).copied()
    }
}

const ALL: [Part; PARTS] = [
    Part::Embedding,
    Part::Attention,
    Part::Rope,
    Part::Mlp,
    Part::Norm,
    Part::Output,
    Part::Matmul,
    Part::Whole,
];

/// The sums of one sample: seconds per part (inclusive of nested spans) and spans entered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub seconds: [f64; PARTS],
    pub entered: [u32; PARTS],
}

impl Sample {
    fn add(&mut self, part: Part, seconds: f64) {
        self.seconds[part.index()] += seconds;
        self.entered[part.index()] += 1;
    }

    /// Seconds spent in `part`'s spans (nested spans of other parts included).
    pub fn seconds(&self, part: Part) -> f64 {
        self.seconds[part.index()]
    }

    /// How many spans of `part` were entered.
    pub fn entered(&self, part: Part) -> u32 {
        self.entered[part.index()]
    }

    /// The forward's time in parts that do not overlap, given the forward's own wall time:
    /// embedding, attention, MLP, LM head, and the rest of the forward (the norms and residual
    /// adds a model leaves outside its spans, the final norm, untraced parts). Parts a model
    /// does not trace read 0 here and fall into the rest (`Sample::entered` says which).
    pub fn grouped(&self, forward_s: f64) -> Grouped {
        let embedding_s = self.seconds(Part::Embedding);
        let attention_s = self.seconds(Part::Attention);
        let mlp_s = self.seconds(Part::Mlp);
        let output_s = self.seconds(Part::Output);
        let traced = embedding_s + attention_s + mlp_s + output_s;
        Grouped {
            embedding_s,
            attention_s,
            mlp_s,
            output_s,
            rest_s: (forward_s - traced).max(0.0),
            matmul_s: self.seconds(Part::Matmul),
        }
    }
}

/// A forward in parts that do not overlap (`Sample::grouped`), plus the weight matmuls across
/// them (which lie inside the attention, the MLP and the head).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Grouped {
    pub embedding_s: f64,
    pub attention_s: f64,
    pub mlp_s: f64,
    pub output_s: f64,
    pub rest_s: f64,
    pub matmul_s: f64,
}

/// Where a sample's timestamps come from: the host's clock on the CPU, where an op has run when
/// the call that made it returns; events recorded on the device's stream on CUDA, where the
/// forward only queues its kernels, so that a sampled step never waits for the GPU mid-forward.
/// A stamp is an index; the times between stamps are read after the step's synchronize.
pub trait Clock {
    /// Takes a timestamp now (on CUDA: records an event on the stream) and returns its index.
    fn stamp(&mut self) -> u32;
    /// Seconds from stamp `from` to stamp `to`, once the device has synchronized; `None` where
    /// a stamp could not be taken (an event that failed to record).
    fn seconds(&self, from: u32, to: u32) -> Option<f64>;
    /// Forgets the stamps (the next sample reuses their storage, or events).
    fn clear(&mut self);
}

/// The host's clock.
#[derive(Default)]
pub struct HostClock(Vec<Instant>);

impl Clock for HostClock {
    fn stamp(&mut self) -> u32 {
        self.0.push(Instant::now());
        (self.0.len() - 1) as u32
    }

    fn seconds(&self, from: u32, to: u32) -> Option<f64> {
        let (a, b) = (self.0.get(from as usize)?, self.0.get(to as usize)?);
        Some(b.saturating_duration_since(*a).as_secs_f64())
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// A span between two stamps.
type Stamped = (Part, u32, u32);

struct Open {
    /// The stamp taken when the sample opened, and the one that ended its input.
    first: u32,
    input: Option<u32>,
    /// The spans entered and not yet left, with their stamp at entry.
    stack: Vec<(Part, u32)>,
    /// The spans left.
    spans: Vec<Stamped>,
    /// For a model whose parts are marked by its norms: where the marks stand.
    marks: Option<Marks>,
}

/// The part the forward is in between two norms, and since when.
struct Marks {
    per_layer: u32,
    /// Norms entered so far in this sample.
    seen: u32,
    /// The part opened by the last boundary norm's exit, and its stamp.
    open: Option<(Part, u32)>,
    /// The parts as the norms mark them; a part the model also traces with a span of its own
    /// (Llama's `attn` and `mlp`) keeps the span's time (`Pending::resolve`).
    marked: Vec<Stamped>,
}

impl Marks {
    /// A norm is entered: it closes the open part if it is a boundary.
    fn norm_entered(&mut self, now: u32) {
        let j = self.seen % self.per_layer;
        self.seen += 1;
        // The input norm (0) closes the MLP, the post-attention norm (last) the attention;
        // the norms inside attention (Qwen3's query and key norms) close nothing.
        if j == 0 || j == self.per_layer - 1 {
            if let Some((part, t0)) = self.open.take() {
                self.marked.push((part, t0, now));
            }
        }
    }

    /// A norm is left: it opens a part if it is a boundary.
    fn norm_left(&mut self, now: u32) {
        let j = (self.seen - 1) % self.per_layer;
        if j == 0 {
            // An input norm, or the final norm: attention, or the head if nothing follows.
            self.open = Some((Part::Attention, now));
        } else if j == self.per_layer - 1 {
            self.open = Some((Part::Mlp, now));
        }
    }

    /// The forward returned: after the final norm comes the LM head (an input norm's
    /// attention that never reached its post-attention norm was the head after all).
    fn forward_done(&mut self, now: u32) {
        if let Some((Part::Attention, t0)) = self.open.take() {
            self.marked.push((Part::Output, t0, now));
        }
    }
}

/// This thread's clock, and its open sample.
struct State {
    clock: Option<Box<dyn Clock>>,
    open: Option<Open>,
}

impl State {
    fn stamp(&mut self) -> u32 {
        self.clock
            .get_or_insert_with(|| Box::new(HostClock::default()))
            .stamp()
    }
}

thread_local! {
    static STATE: RefCell<State> = const { RefCell::new(State { clock: None, open: None }) };
}

/// Times this thread's samples with `clock` from now on (the host's clock until then).
pub fn use_clock(clock: Box<dyn Clock>) {
    STATE.with(|s| s.borrow_mut().clock = Some(clock));
}

/// Opens a sample on this thread: the spans it enters from now on are timed. `norms` is given
/// for a model whose attention and MLP are marked by its norms rather than by spans of their
/// own (`CausalLm::norms`).
pub fn begin(norms: Option<Norms>) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(clock) = s.clock.as_mut() {
            clock.clear();
        }
        let first = s.stamp();
        s.open = Some(Open {
            first,
            input: None,
            stack: Vec::with_capacity(16),
            spans: Vec::with_capacity(256),
            marks: norms.filter(|n| n.0 > 0).map(|n| Marks {
                per_layer: n.0,
                seen: 0,
                open: None,
                marked: Vec::with_capacity(128),
            }),
        });
    });
}

/// Marks the end of the step's input (the forward starts here) in this thread's sample.
pub fn input_done() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.open.is_some() {
            let now = s.stamp();
            if let Some(open) = s.open.as_mut() {
                open.input = Some(now);
            }
        }
    });
}

/// Closes this thread's sample when the forward has returned (`None` when none was open). Its
/// times are read with `Pending::resolve` after the step's synchronize, on this thread.
pub fn end() -> Option<Pending> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let mut open = s.open.take()?;
        let last = s.stamp();
        let marked = open.marks.take().map(|mut m| {
            m.forward_done(last);
            m.marked
        });
        Some(Pending {
            first: open.first,
            input: open.input.unwrap_or(open.first),
            last,
            spans: open.spans,
            marked,
        })
    })
}

/// A closed sample whose times are read after the step's synchronize.
pub struct Pending {
    first: u32,
    input: u32,
    last: u32,
    spans: Vec<Stamped>,
    marked: Option<Vec<Stamped>>,
}

/// A sample's times: the input's, the forward's and the parts inside it.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub input_s: f64,
    pub forward_s: f64,
    pub sample: Sample,
}

impl Pending {
    /// Reads the sample's times from this thread's clock, after the device's synchronize and
    /// before the next sample opens. `None` where a stamp could not be taken.
    pub fn resolve(&self) -> Option<Resolved> {
        STATE.with(|s| {
            let s = s.borrow();
            let clock = s.clock.as_ref()?;
            let sum = |spans: &[Stamped]| -> Option<Sample> {
                let mut sample = Sample::default();
                for &(part, a, b) in spans {
                    sample.add(part, clock.seconds(a, b)?);
                }
                Some(sample)
            };
            let mut sample = sum(&self.spans)?;
            if let Some(marked) = &self.marked {
                let marked = sum(marked)?;
                for part in [Part::Attention, Part::Mlp, Part::Output] {
                    let i = part.index();
                    if sample.entered[i] == 0 {
                        sample.seconds[i] = marked.seconds[i];
                        sample.entered[i] = marked.entered[i];
                    }
                }
            }
            Some(Resolved {
                input_s: clock.seconds(self.first, self.input)?,
                forward_s: clock.seconds(self.input, self.last)?,
                sample,
            })
        })
    }
}

/// Installs the span timer as the process's tracing subscriber, before any model is built
/// (once; later calls say how the first went). Returns false when the process already had
/// another (then no part of the forward can be timed).
pub fn install() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Spans).is_ok())
}

/// The subscriber: each span's id is its part (+1), so entering one needs no lookup.
struct Spans;

impl Subscriber for Spans {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_span() && Part::of(metadata.name()).is_some()
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        // `enabled` admitted only names with a part.
        let part = Part::of(span.metadata().name()).unwrap_or(Part::Whole);
        Id::from_u64(part.index() as u64 + 1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, _event: &Event<'_>) {}

    fn enter(&self, span: &Id) {
        let Some(part) = Part::from_id(span) else {
            return;
        };
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            if s.open.is_none() {
                return;
            }
            let now = s.stamp();
            if let Some(open) = s.open.as_mut() {
                if part == Part::Norm {
                    if let Some(m) = open.marks.as_mut() {
                        m.norm_entered(now);
                    }
                }
                open.stack.push((part, now));
            }
        });
    }

    fn exit(&self, span: &Id) {
        let Some(part) = Part::from_id(span) else {
            return;
        };
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            // A span entered before the sample opened has nothing on the stack.
            let Some(at) = s
                .open
                .as_ref()
                .and_then(|open| open.stack.iter().rposition(|(p, _)| *p == part))
            else {
                return;
            };
            let now = s.stamp();
            if let Some(open) = s.open.as_mut() {
                let (_, t0) = open.stack.remove(at);
                open.spans.push((part, t0, now));
                if part == Part::Norm {
                    if let Some(m) = open.marks.as_mut() {
                        m.norm_left(now);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(name: &'static str) -> tracing::Span {
        match name {
            "attn" => tracing::span!(tracing::Level::TRACE, "attn"),
            "attn-rot" => tracing::span!(tracing::Level::TRACE, "attn-rot"),
            "mlp" => tracing::span!(tracing::Level::TRACE, "mlp"),
            _ => tracing::span!(tracing::Level::TRACE, "other"),
        }
    }

    /// Closes the sample and reads it (on the CPU nothing needs synchronizing first).
    fn sampled() -> Sample {
        end().and_then(|p| p.resolve()).unwrap().sample
    }

    fn busy(d: std::time::Duration) {
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn spans_add_up_per_part_only_inside_a_sample() {
        // A scoped dispatcher: the test binary's other threads keep theirs.
        tracing::subscriber::with_default(Spans, || {
            let (attn, rot, mlp, other) = (
                timed("attn"),
                timed("attn-rot"),
                timed("mlp"),
                timed("other"),
            );
            let ms = std::time::Duration::from_millis(1);
            // Not sampled: nothing kept.
            {
                let _a = attn.enter();
                busy(ms);
            }
            assert!(end().is_none());

            begin(None);
            for _ in 0..3 {
                let _a = attn.enter();
                {
                    let _r = rot.enter();
                    busy(ms);
                }
                busy(ms);
            }
            {
                let _m = mlp.enter();
                busy(2 * ms);
            }
            {
                let _o = other.enter();
                busy(ms);
            }
            let s = sampled();
            assert_eq!(s.entered(Part::Attention), 3);
            assert_eq!(s.entered(Part::Rope), 3);
            assert_eq!(s.entered(Part::Mlp), 1);
            assert!(s.seconds(Part::Attention) >= 0.006, "{s:?}");
            assert!(s.seconds(Part::Rope) >= 0.003, "{s:?}");
            assert!(s.seconds(Part::Rope) < s.seconds(Part::Attention), "{s:?}");
            assert!(s.seconds(Part::Mlp) >= 0.002, "{s:?}");
            let g = s.grouped(0.010);
            assert_eq!(g.attention_s, s.seconds(Part::Attention));
            assert!((g.rest_s - (0.010 - g.attention_s - g.mlp_s).max(0.0)).abs() < 1e-12);
            // Closed: the next enter is not kept.
            {
                let _a = attn.enter();
            }
            assert!(end().is_none());
        });
    }

    /// A pre-norm forward of `layers` layers as candle-transformers' dense models trace it:
    /// only the norms enter spans. Attention takes 2 ms (with `inner` norms inside it), the
    /// MLP 3 ms, the head 1 ms.
    fn norm_marked_forward(layers: u32, inner: u32) -> Sample {
        let ms = std::time::Duration::from_millis(1);
        let norm = tracing::span!(tracing::Level::TRACE, "rms-norm");
        let linear = tracing::span!(tracing::Level::TRACE, "linear");
        let normed = || {
            let _n = norm.enter();
            busy(ms / 10);
        };
        begin(Some(Norms(2 + inner)));
        busy(ms); // the embedding: before any norm, in the rest
        for _ in 0..layers {
            normed();
            for _ in 0..inner {
                busy(ms / 2);
                normed();
            }
            {
                let _l = linear.enter();
                busy(2 * ms - ms / 2 * inner);
            }
            normed();
            busy(3 * ms);
        }
        normed();
        {
            let _l = linear.enter();
            busy(ms);
        }
        sampled()
    }

    #[test]
    fn the_norms_of_a_model_without_part_spans_mark_its_attention_mlp_and_head() {
        tracing::subscriber::with_default(Spans, || {
            for inner in [0, 2] {
                let s = norm_marked_forward(3, inner);
                assert_eq!(s.entered(Part::Attention), 3, "{inner}: {s:?}");
                assert_eq!(s.entered(Part::Mlp), 3, "{inner}: {s:?}");
                assert_eq!(s.entered(Part::Output), 1, "{inner}: {s:?}");
                assert_eq!(s.entered(Part::Norm), 3 * (2 + inner) + 1, "{inner}: {s:?}");
                // Busy waits last at least their time; a preempted one may last longer, so the
                // bounds above are loose and the order of the parts is what is asserted.
                let (attn, mlp, head) = (
                    s.seconds(Part::Attention),
                    s.seconds(Part::Mlp),
                    s.seconds(Part::Output),
                );
                assert!(attn >= 0.006 && mlp >= 0.009 && head >= 0.001, "{s:?}");
                // The embedding (1 ms before the first norm) is in none of them.
                let g = s.grouped(0.001 + attn + mlp + head);
                assert_eq!(g.embedding_s, 0.0);
                assert!((g.rest_s - 0.001).abs() < 1e-9, "{g:?}");
            }
            // A model that times its attention with a span of its own (dense Llama) keeps the
            // span's time there; the norms give it only the head.
            let (norm, attn) = (
                tracing::span!(tracing::Level::TRACE, "rms-norm"),
                tracing::span!(tracing::Level::TRACE, "attn"),
            );
            let ms = std::time::Duration::from_millis(1);
            begin(Some(Norms(2)));
            for _ in 0..2 {
                norm.in_scope(|| ());
                busy(5 * ms); // outside the attn span: not the attention's
                attn.in_scope(|| busy(ms));
                norm.in_scope(|| ());
            }
            norm.in_scope(|| ());
            busy(ms);
            let s = sampled();
            assert_eq!(s.entered(Part::Attention), 2, "{s:?}");
            assert!(s.seconds(Part::Attention) < 0.005, "{s:?}");
            assert_eq!(s.entered(Part::Output), 1, "{s:?}");
            // A sample opened without norms credits nothing to the parts from norms.
            begin(None);
            {
                let _n = tracing::span!(tracing::Level::TRACE, "rms-norm").entered();
            }
            busy(std::time::Duration::from_millis(1));
            let s = sampled();
            assert_eq!(
                s.entered(Part::Output) + s.entered(Part::Attention),
                0,
                "{s:?}"
            );
        });
    }

    /// A clock whose stamps are read later, as CUDA's events are: each stamp is one tick of
    /// 1 ms after the one before, whenever it was taken; `broken` stamps cannot be read.
    struct Ticks {
        taken: u32,
        broken: bool,
    }

    impl Clock for Ticks {
        fn stamp(&mut self) -> u32 {
            self.taken += 1;
            self.taken - 1
        }
        fn seconds(&self, from: u32, to: u32) -> Option<f64> {
            (!self.broken && to < self.taken).then(|| f64::from(to - from) * 1e-3)
        }
        fn clear(&mut self) {
            self.taken = 0;
        }
    }

    #[test]
    fn a_sample_is_read_from_its_clock_after_the_forward() {
        tracing::subscriber::with_default(Spans, || {
            let attn = timed("attn");
            for broken in [false, true] {
                // Stamps 0 at `begin`, 1 at the input's end, 2 and 3 around the span, 4 at
                // `end`; read after the (here: nothing to) synchronize, from the clock alone.
                use_clock(Box::new(Ticks { taken: 0, broken }));
                begin(None);
                input_done();
                attn.in_scope(|| ());
                let pending = end().unwrap();
                match pending.resolve() {
                    Some(r) => {
                        assert!(!broken);
                        assert_eq!(r.input_s, 1e-3);
                        assert_eq!(r.forward_s, 3e-3);
                        assert_eq!(r.sample.seconds(Part::Attention), 1e-3);
                        assert_eq!(r.sample.entered(Part::Attention), 1);
                        let g = r.sample.grouped(r.forward_s);
                        assert!((g.rest_s - 2e-3).abs() < 1e-12, "{g:?}");
                    }
                    None => assert!(broken, "a readable clock gave no times"),
                }
            }
        });
    }

    #[test]
    fn every_candle_span_name_of_our_models_has_a_part() {
        for name in [
            "attn", "attn-rot", "attn-mlp", "mlp", "model", "output", "qmatmul",
        ] {
            assert!(Part::of(name).is_some(), "{name}");
        }
        assert_eq!(Part::of("conv2d"), None);
    }
}
