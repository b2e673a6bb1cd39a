//! Run records, the file format: its lines (`line`, one enum for writer and reader), the JSONL
//! writer (`writer`), the one reader of the format and the record read whole (`reader`), a
//! record's lines as the run's events (`feed`, which `replay`, `follow` and `report` all fold),
//! and several records read as one run (`merge`). What is made from records (reports,
//! comparisons, slices, plots, traces) is `report`'s; the summary every mode prints, which a
//! record's footer keeps, is `summary`'s. The format is documented in `docs/record-format.md`.
//!
//! A record is JSON lines, each with a `type`:
//! `header` (version, command line, config, model, machine), `request` (one per finished
//! request), `step` (with `--jsonl-steps`), `telemetry`, `event` (pause, resume, reset, workload
//! change, error), and `footer` (how the run ended, and the summary). It is flushed after every
//! request, so a run cut off mid-line still reads up to its last whole line.

pub mod feed;
pub mod line;
pub mod merge;
pub mod reader;
pub mod writer;

pub use writer::Recorder;
