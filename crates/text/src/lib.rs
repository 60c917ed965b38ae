//! llmbench-text: text as the benchmark tools' Python makes it, so llmbench's prompts and orders are theirs. The
//! run's tokenizer ([`tokenizer`]: a `tokenizer.json`, a hub download, or the built-in word tokenizer the simulator
//! counts with), chat templates rendered as transformers renders them ([`chat_template`]), CPython's `random` and
//! numpy's legacy `RandomState` streams ([`py_random`]) and its `default_rng` ([`numpy_generator`]), and pickled pandas DataFrames read without Python
//! ([`pickle`]). Pure of the network but for tokenizer downloads; it imports no other llmbench crate.
#![forbid(unsafe_code)]

pub mod chat_template;
pub mod numpy_generator;
pub mod pickle;
pub mod py_random;
pub mod tokenizer;
