//! llmbench-metrics: the numbers, derived after (or beside) the run. Exact statistics, per-stage summaries,
//! `summary.json` and the SLO capacity search ([`metrics`]); the server's own Prometheus metrics, scraped and
//! summarised ([`server_metrics`]); MLPerf LoadGen's settings, schedules and verdict ([`mlperf`]). It imports the
//! model, workload and engine layers only.
#![forbid(unsafe_code)]

pub mod metrics;
pub mod mlperf;
pub mod server_metrics;
