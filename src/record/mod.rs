//! Run records: JSONL writer and reader, reports, comparisons.
