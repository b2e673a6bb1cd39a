//! Decode steps, and how they travel: held a millisecond and sent together (`StepBatch`), in
//! lists the dashboard gives back for the next batches (the step pool).

use super::Event;

/// One decode step (one token per sequence) of request `index`; `step` counts from 1 (the
/// token after the first).
///
/// 32 bytes: at 100,000 steps a second the dashboard reads every step once from memory the
/// engine's thread wrote, and an `Option<f64>` for the GPU time made it 40. The GPU time is
/// kept as bits, with `NO_GPU` (a NaN no timer gives) for none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecodeStep {
    pub index: u64,
    pub itl_s: f64,
    gpu_bits: u64,
    pub step: u32,
}

/// `DecodeStep::gpu_bits` when the step has no GPU time.
const NO_GPU: u64 = u64::MAX;

impl DecodeStep {
    /// A step with its wall-clock ITL and, where a device timer measured it, its GPU time (a
    /// NaN GPU time is none).
    pub fn new(index: u64, step: u32, itl_s: f64, gpu_s: Option<f64>) -> DecodeStep {
        DecodeStep {
            index,
            itl_s,
            gpu_bits: gpu_s.filter(|g| !g.is_nan()).map_or(NO_GPU, f64::to_bits),
            step,
        }
    }

    /// The step's GPU time, when a device timer measured it.
    pub fn gpu_s(&self) -> Option<f64> {
        (self.gpu_bits != NO_GPU).then(|| f64::from_bits(self.gpu_bits))
    }
}

/// How long an engine holds decode steps before it sends them as one event: a fast engine
/// (a small model on a GPU, a server at high concurrency) hands the consumers one event a
/// millisecond instead of one per token, and the dashboard still sees every step well inside
/// a frame.
pub const STEP_BATCH: std::time::Duration = std::time::Duration::from_millis(1);

/// Decode steps on their way into the channel. A step goes out at once when the last send
/// was `STEP_BATCH` ago or more, else it waits for the next step that is, for `flush`, or
/// for the next other event: a producer flushes before any other event it sends, so the
/// channel keeps every event in the order it happened (a request's steps before its
/// `RequestDone`).
#[derive(Debug)]
pub struct StepBatch {
    steps: Vec<DecodeStep>,
    /// The last send; none yet sends the first step at once.
    sent: Option<std::time::Instant>,
}

impl Default for StepBatch {
    fn default() -> Self {
        StepBatch::new()
    }
}

impl StepBatch {
    pub fn new() -> StepBatch {
        StepBatch {
            steps: Vec::new(),
            sent: None,
        }
    }

    /// Holds `step`, and sends what is held if the last send was `STEP_BATCH` ago or more.
    pub fn push(&mut self, step: DecodeStep, tx: &crossbeam_channel::Sender<Event>) {
        self.push_at(step, std::time::Instant::now(), tx);
    }

    /// `push` at `now`.
    pub fn push_at(
        &mut self,
        step: DecodeStep,
        now: std::time::Instant,
        tx: &crossbeam_channel::Sender<Event>,
    ) {
        if self.steps.capacity() == 0 {
            // Taken when a step comes rather than at each send, so a batch that ends (the
            // request's last flush) does not take a list from the pool only to drop it.
            self.steps = spare_steps();
        }
        self.steps.push(step);
        if self
            .sent
            .is_none_or(|t| now.saturating_duration_since(t) >= STEP_BATCH)
        {
            self.send(now, tx);
        }
    }

    /// Sends the steps held, if any.
    pub fn flush(&mut self, tx: &crossbeam_channel::Sender<Event>) {
        if !self.steps.is_empty() {
            self.send(std::time::Instant::now(), tx);
        }
    }

    fn send(&mut self, now: std::time::Instant, tx: &crossbeam_channel::Sender<Event>) {
        let _ = tx.send(Event::DecodeSteps(std::mem::take(&mut self.steps)));
        self.sent = Some(now);
    }

    /// Whether steps are held.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// Emptied step lists for new batches, bounded by their room: `SPARE_ROOM` steps in all
/// (2 MB). Never waits: whichever side finds it held goes without (a new list, or a free).
struct StepPool {
    spare: std::sync::Mutex<Spare>,
}

struct Spare {
    lists: Vec<Vec<DecodeStep>>,
    /// The lists' capacities, summed.
    room: usize,
}

const SPARE_ROOM: usize = 65_536;

impl StepPool {
    const fn new() -> StepPool {
        StepPool {
            spare: std::sync::Mutex::new(Spare {
                lists: Vec::new(),
                room: 0,
            }),
        }
    }

    /// A list given back, or a new one.
    fn take(&self) -> Vec<DecodeStep> {
        let Ok(mut spare) = self.spare.try_lock() else {
            return Vec::new();
        };
        let list = spare.lists.pop().unwrap_or_default();
        spare.room -= list.capacity();
        list
    }

    /// Keeps `event`'s step list, emptied, when there is room; drops anything else.
    fn give(&self, event: Event) {
        let Event::DecodeSteps(mut steps) = event else {
            return;
        };
        if steps.capacity() == 0 {
            return;
        }
        if let Ok(mut spare) = self.spare.try_lock() {
            if spare.room + steps.capacity() <= SPARE_ROOM {
                steps.clear();
                spare.room += steps.capacity();
                spare.lists.push(steps);
            }
        }
    }
}

/// Step lists the dashboard has folded in, for the engines' next batches: at 100,000 steps a
/// second a list is allocated on the engine's thread and freed on the dashboard's about a
/// thousand times a second, and a free of another thread's block takes that thread's arena
/// in the system allocator, the one the engine allocates its tensors from. The dashboard
/// takes a frame's batches at once (a hundred at 10 fps), hence room for that many. Only the
/// dashboard gives lists back (`recycle`); with no dashboard the pool stays empty and a batch
/// starts with a new list, as it did before.
static STEP_POOL: StepPool = StepPool::new();

/// An empty step list for a new batch: one the dashboard gave back, or a new one.
pub fn spare_steps() -> Vec<DecodeStep> {
    STEP_POOL.take()
}

/// Takes back an event a consumer is done with: a decode-step list goes to the pool for the
/// next batch (`spare_steps`) when there is room, anything else is dropped.
pub fn recycle(event: Event) {
    STEP_POOL.give(event);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn step(step: u32) -> DecodeStep {
        DecodeStep::new(7, step, 0.0004, None)
    }

    /// Takes lists out of `pool` until it gives a new one (no capacity); their capacities.
    fn take_spares(pool: &StepPool) -> Vec<usize> {
        std::iter::repeat_with(|| pool.take())
            .inspect(|l| assert!(l.is_empty(), "a spare list holds steps"))
            .map(|l| l.capacity())
            .take_while(|&c| c > 0)
            .take(10_000)
            .collect()
    }

    /// A step list given back comes out empty with its room for the next batch; the pool
    /// keeps `SPARE_ROOM` steps of room at most, however many are given back, and drops
    /// anything but a step list.
    #[test]
    fn step_lists_given_back_are_reused_and_bounded() {
        let pool = StepPool::new();
        assert!(take_spares(&pool).is_empty());
        let mut list = Vec::with_capacity(333);
        list.extend((1..=200).map(step));
        pool.give(Event::DecodeSteps(list));
        pool.give(Event::Paused);
        pool.give(Event::DecodeSteps(Vec::new()));
        assert_eq!(take_spares(&pool), [333]);
        for _ in 0..500 {
            pool.give(Event::DecodeSteps(Vec::with_capacity(1000)));
        }
        let kept = take_spares(&pool);
        assert_eq!(kept.len(), SPARE_ROOM / 1000);
        // Taken out, the room is free again.
        pool.give(Event::DecodeSteps(Vec::with_capacity(SPARE_ROOM)));
        assert_eq!(take_spares(&pool), [SPARE_ROOM]);
    }

    /// A step is 32 bytes, and keeps its GPU time, or the lack of one, exactly.
    #[test]
    fn a_step_is_small_and_keeps_its_gpu_time() {
        assert_eq!(std::mem::size_of::<DecodeStep>(), 32);
        for gpu in [None, Some(0.0), Some(-0.0), Some(1.25e-4), Some(f64::MAX)] {
            let s = DecodeStep::new(3, 9, 0.002, gpu);
            assert_eq!(s.gpu_s().map(f64::to_bits), gpu.map(f64::to_bits));
            assert_eq!((s.index, s.step, s.itl_s), (3, 9, 0.002));
        }
        assert_eq!(DecodeStep::new(3, 9, 0.002, Some(f64::NAN)).gpu_s(), None);
        assert_ne!(step(1), DecodeStep::new(7, 1, 0.0004, Some(0.0003)));
    }

    fn sent(rx: &crossbeam_channel::Receiver<Event>) -> Vec<Vec<u32>> {
        rx.try_iter()
            .map(|e| match e {
                Event::DecodeSteps(s) => s.iter().map(|s| s.step).collect(),
                other => panic!("not steps: {other:?}"),
            })
            .collect()
    }

    /// The first step goes at once; steps within `STEP_BATCH` of the last send wait for the
    /// first step past it, which takes them along; `flush` sends the rest, and nothing when
    /// nothing is held.
    #[test]
    fn steps_faster_than_the_batch_go_out_together() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut batch = StepBatch::new();
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        batch.push_at(step(1), at(0), &tx);
        batch.push_at(step(2), at(400), &tx);
        batch.push_at(step(3), at(800), &tx);
        assert_eq!(sent(&rx), [vec![1]]);
        batch.push_at(step(4), at(1200), &tx);
        assert_eq!(sent(&rx), [vec![2, 3, 4]]);
        // Slower than the batch: every step goes alone.
        batch.push_at(step(5), at(2300), &tx);
        batch.push_at(step(6), at(3400), &tx);
        assert_eq!(sent(&rx), [vec![5], vec![6]]);
        batch.push_at(step(7), at(3500), &tx);
        assert!(!batch.is_empty());
        batch.flush(&tx);
        batch.flush(&tx);
        assert_eq!(sent(&rx), [vec![7]]);
        assert!(batch.is_empty());
    }
}

/// One sampled step of the candle engine in parts (`--step-parts N`), seconds each. The parts
/// add up to `wall_s`: `input_s` + the forward (`embedding_s` + `attention_s` + `mlp_s` +
/// `head_s` + `rest_s`) + `sample_s`. A part the model does not trace is `None` (its time is
/// in `rest_s`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepParts {
    pub index: u64,
    /// 0: the prefill; k: decode step k.
    pub step: u32,
    pub warmup: bool,
    /// Tokens the step ran: batch × prompt for a prefill, the batch for a decode step.
    pub tokens: usize,
    /// Positions each sequence holds in its KV cache once the step ran: the prompt for a
    /// prefill, prompt + k for decode step k (what its attention reads). 0 in older records.
    #[serde(default)]
    pub context: usize,
    /// The whole timed region, as the step's TTFT or ITL.
    pub wall_s: f64,
    /// Building the input (a prefill uploads the prompt ids).
    pub input_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_s: Option<f64>,
    /// Every layer's attention: projections, rotary embedding, KV cache, softmax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_s: Option<f64>,
    /// Every layer's feed-forward block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_s: Option<f64>,
    /// The LM head (the final norm is in `rest_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_s: Option<f64>,
    /// The forward outside those: the norms and residual adds a model leaves outside its
    /// spans, the final norm, and every part it does not trace.
    pub rest_s: f64,
    /// The weight matmuls (inside attention, MLP and head), where the model traces them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matmul_s: Option<f64>,
    /// Argmax (or host sampling), the ids' copy to the host, and the device synchronize.
    pub sample_s: f64,
}

impl StepParts {
    /// The parts in the order a forward runs them: (key, what tables and traces call it).
    pub const PARTS: [(&'static str, &'static str); 7] = [
        ("input", "input"),
        ("embedding", "embedding"),
        ("attention", "attention"),
        ("mlp", "mlp"),
        ("head", "lm head"),
        ("rest", "rest of forward"),
        ("sample", "sample + copy + sync"),
    ];

    /// Seconds per part in `PARTS` order (they add up to `wall_s`); `None` for a part the
    /// model does not trace.
    pub fn seconds(&self) -> [Option<f64>; 7] {
        [
            Some(self.input_s),
            self.embedding_s,
            self.attention_s,
            self.mlp_s,
            self.head_s,
            Some(self.rest_s),
            Some(self.sample_s),
        ]
    }

    pub fn is_prefill(&self) -> bool {
        self.step == 0
    }
}
