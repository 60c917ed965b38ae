//! llmbench-sim: the embedded vLLM-compatible simulator behind `llmbench sim` and a run without a server
//! ([`sim`]). It stands beside the pipeline, not in it: it imports llmbench-model (its clocks) and
//! llmbench-workload (the built-in tokenizer's word count) only.
#![forbid(unsafe_code)]

pub mod sim;
