//! llmbench-engine: the run's clock and wire. The engine ([`engine`]) sends each stage's requests at their times
//! over its own HTTP/1.1 client, stamps every chunk and turns each request into its record; [`trace`] and
//! [`session_replay`] make the replay plans of traces and agentic sessions; [`live`] and [`progress`] show a
//! run while it goes; [`stack`] is the server under test: which one it is, its profiler hooks, and the stack
//! `--serve` starts. It imports llmbench-model, llmbench-workload and llmbench-sim (the simulator's version
//! suffix) only.
#![forbid(unsafe_code)]

pub mod engine;
pub mod live;
pub mod progress;
pub mod session_replay;
pub mod stack;
pub mod trace;
