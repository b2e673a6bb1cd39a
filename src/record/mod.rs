//! Run records: the JSONL writer (`writer`), the one reader of the format and the record read
//! whole (`reader`), a record's lines as the run's events (`feed`, which `replay`, `follow` and
//! `report` all fold), reports (settling, goodput, roofline, cost, plots), every statistic per
//! window of run time (`slice`), comparisons, merges of several records and Perfetto traces.
//! The summary every mode prints, which a record's footer keeps, is `summary`'s. The format is
//! documented in `docs/record-format.md`.
//!
//! A record is JSON lines, each with a `type`:
//! `header` (version, command line, config, model, machine), `request` (one per finished
//! request), `step` (with `--jsonl-steps`), `telemetry`, `event` (pause, resume, reset, workload
//! change, error), and `footer` (how the run ended, and the summary). It is flushed after every
//! request, so a run cut off mid-line still reads up to its last whole line.

pub mod compare;
pub mod feed;
pub mod line;
pub mod llmd;
pub mod merge;
pub mod plot;
pub mod reader;
pub mod report;
pub mod slice;
pub mod trace;
pub mod writer;

pub use writer::Recorder;
