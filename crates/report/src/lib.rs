//! llmbench-report: what a run leaves behind, written from its records and summary. `run.json` and every
//! tool's native report, the llm-d benchmark report and the terminal's tables ([`report`]); the pictures, a run's
//! `report.html` and the comparison's `compare.html` ([`plot`]). It runs nothing: the launcher calls it, and hands
//! it what it must not import (how to draw a rebuilt run's pictures, how to read an experiment directory, a nop
//! run's model-load figures read again from its files). It imports the model, workload, engine and metrics layers.
#![forbid(unsafe_code)]

pub mod export;
pub mod plot;
pub mod report;
