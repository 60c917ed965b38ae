//! Prompts for a run, built before the clock starts: synthetic prompts of exact token lengths (inference-perf
//! `random`/`synthetic`/`shared_prefix`, guidellm `synthetic_text` with prefix buckets, vLLM `random` and
//! `sonnet`), and prompts read from dataset files (ShareGPT, JSON, JSONL, CSV or MLPerf's pickled pandas
//! DataFrames, with `input`, `tok_input`, `output`).
//!
//! Every length here is a text's own tokens under the run's tokenizer, without the special tokens (BOS, …) the
//! tokenizer adds; the `prompts` module says how each tool counts those and adds them to the synthetic prompts it
//! makes into requests.

mod dataset;
pub mod image;
mod lengths;
mod parquet_rows;
mod synth;
pub mod text_file;
pub mod weka_trace;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use llmbench_text::tokenizer::TokenizerError;

pub use dataset::json_kind;
pub use dataset::{load_dataset, load_sharegpt};
pub use lengths::{LengthDistribution, LengthSampler};
pub use parquet_rows::{parquet_binary_columns, parquet_metadata, parquet_rows};
pub use synth::{
    PrefixBucket, SPOT_CHECK_EVERY, SharedPrefixSpec, Synthesizer, SyntheticSpec,
    shared_prefix_prompts, synthetic_prompts,
};

/// One prompt, ready to become a request body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    /// The prompt text (for a token-id prompt, its decoded text, used by chat requests).
    pub text: String,
    /// Pre-tokenised input (a dataset's `tok_input`): sent as a token-id prompt to completions.
    pub token_ids: Option<Vec<u32>>,
    /// Chat turns, when the data has them; otherwise chat requests send `text` as one user turn.
    pub messages: Option<Vec<ChatMessage>>,
    /// The prompt's length in tokens under the run's tokenizer: its own tokens; for a synthetic prompt made into a
    /// request (the `prompts` module), also the special tokens the tokenizer adds, as the server counts a completion.
    pub input_tokens: u32,
    /// `max_tokens` to request; None leaves it to the server (or the run's default).
    pub max_tokens: Option<u32>,
    /// The dataset's reference output, when it has one.
    pub output: Option<String>,
    /// The shared prefix the prompt starts with (shared-prefix group or prefix-bucket entry), if any.
    pub prefix_group: Option<u32>,
    /// Images sent after the text (vLLM `random-mm`); their tokens are the server's to count, so `input_tokens`
    /// holds the text's alone, as vLLM's `prompt_len` does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<image::ImageInput>,
    /// A rankings request's passages (AIPerf's rankings endpoint types): `text` is the query they are ranked
    /// against, and `input_tokens` counts the query and every passage.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passages: Vec<String>,
    /// Fields a rankings body takes last, over the run's extra inputs (an AIPerf `single_turn` line's `extra`,
    /// `payload.update(turn.extra_body)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Prompt {
    /// A plain text prompt.
    pub fn text(text: String, input_tokens: u32, max_tokens: Option<u32>) -> Self {
        Prompt {
            text,
            token_ids: None,
            messages: None,
            input_tokens,
            max_tokens,
            output: None,
            prefix_group: None,
            images: Vec::new(),
            passages: Vec::new(),
            extra_body: None,
        }
    }
}

/// One chat turn, serialised as OpenAI's `{"role", "content"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// The prompts a generator or loader produced, with what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prompts {
    prompts: Vec<Prompt>,
    /// Dataset entries skipped (too short, too long, no usable turns).
    pub skipped: usize,
}

/// Token-length statistics of a set of prompts, for the run log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromptStats {
    pub count: usize,
    pub input_tokens_min: u32,
    pub input_tokens_max: u32,
    pub input_tokens_mean: f64,
    /// Mean of the `max_tokens` that are set; None when none is.
    pub max_tokens_mean: Option<f64>,
}

impl Prompts {
    pub fn new(prompts: Vec<Prompt>, skipped: usize) -> Self {
        Prompts { prompts, skipped }
    }

    pub fn into_inner(self) -> Vec<Prompt> {
        self.prompts
    }

    pub fn as_slice(&self) -> &[Prompt] {
        &self.prompts
    }

    pub fn len(&self) -> usize {
        self.prompts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty()
    }

    pub fn stats(&self) -> PromptStats {
        let inputs = self.prompts.iter().map(|p| p.input_tokens);
        let outputs: Vec<u32> = self.prompts.iter().filter_map(|p| p.max_tokens).collect();
        let count = self.prompts.len();
        PromptStats {
            count,
            input_tokens_min: inputs.clone().min().unwrap_or(0),
            input_tokens_max: inputs.clone().max().unwrap_or(0),
            input_tokens_mean: if count == 0 {
                0.0
            } else {
                inputs.map(f64::from).sum::<f64>() / count as f64
            },
            max_tokens_mean: (!outputs.is_empty()).then(|| {
                outputs.iter().copied().map(f64::from).sum::<f64>() / outputs.len() as f64
            }),
        }
    }
}

/// How a dataset file is read.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetOptions {
    /// A fixed `max_tokens` for every prompt, instead of the reference output's length.
    pub output_tokens: Option<u32>,
    /// Keep at most this many prompts.
    pub limit: Option<usize>,
    /// ShareGPT only: keep only the entries vLLM's `ShareGPTDataset` keeps (`conversations` of two turns or more),
    /// before any shuffle; otherwise a `conversation` list is read too.
    pub vllm_entries: bool,
    /// ShareGPT only: shuffle the entries as vLLM's `ShareGPTDataset` does with this seed (only the entries whose
    /// `conversations` hold two turns or more, by Python's `random.shuffle`) before taking them; None keeps file
    /// order.
    pub shuffle_seed: Option<u64>,
    /// ShareGPT: skip prompts (and, when the output length comes from the data, outputs) shorter than this
    /// (vLLM: 4).
    pub min_tokens: u32,
    /// ShareGPT: skip prompts longer than this (vLLM: 1024).
    pub max_prompt_tokens: Option<u32>,
    /// ShareGPT: skip entries whose prompt plus output is longer than this (vLLM: 2048).
    pub max_total_tokens: Option<u32>,
    /// ShareGPT: an entry's `image` becomes its prompt's image and a `video` is refused, as vLLM's
    /// `ShareGPTDataset` sends them with a chat backend (ShareGPT4V's layout); otherwise both are left out, as
    /// every other tool and backend leaves them.
    pub images: bool,
}

impl Default for DatasetOptions {
    fn default() -> Self {
        DatasetOptions {
            output_tokens: None,
            limit: None,
            shuffle_seed: None,
            vllm_entries: false,
            min_tokens: 4,
            max_prompt_tokens: Some(1024),
            max_total_tokens: Some(2048),
            images: false,
        }
    }
}

/// Why prompts could not be built from the data section or a dataset file.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path} as Parquet: {source}")]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    #[error(
        "{path} is a Python pickle; llmbench reads pickled pandas DataFrames only as dataset tables (columns \
         input, tok_input, output: `llmbench dataset convert {path} out.jsonl` shows what it reads), not here; \
         convert it to JSON records first, e.g. python -c 'import pandas as p; \
         p.read_pickle(\"{path}\").to_json(\"out.json\", orient=\"records\")'"
    )]
    Pickle { path: PathBuf },
    #[error("{path}: cannot read the pickled DataFrame: {source}")]
    PickledFrame {
        path: PathBuf,
        source: llmbench_text::pickle::PickleError,
    },
    #[error(
        "{path}: unknown dataset format; use .json, .jsonl, .csv or .parquet (columns input, tok_input, output)"
    )]
    UnsupportedFormat { path: PathBuf },
    #[error("{path}:{line}:{column}: invalid JSON: {message}")]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: line {line}: invalid CSV: {message}")]
    Csv {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("{path}: {row}, column `{column}`: {message}")]
    Field {
        path: PathBuf,
        /// Where in the file: `line 7`, `row 3`, `entry 12`.
        row: String,
        column: String,
        message: String,
    },
    #[error("{path}: {message}")]
    Shape { path: PathBuf, message: String },
    #[error("{path}: {row}: {source}")]
    Tokenize {
        path: PathBuf,
        row: String,
        source: TokenizerError,
    },
    #[error("{path}: no usable prompts ({reason})")]
    NoPrompts { path: PathBuf, reason: String },
    #[error("data: {what}: {reason}")]
    InvalidDistribution { what: String, reason: String },
    #[error("data: the random range ratio must be in [0, 1), found {ratio}")]
    RangeRatio { ratio: f64 },
    #[error(
        "tokenizer {tokenizer} has no plain word tokens to synthesise prompts from; use a tokenizer with a word \
         vocabulary, or `builtin`"
    )]
    NoVocabulary { tokenizer: String },
    #[error("corpus {name} holds no tokens")]
    EmptyCorpus { name: String },
    #[error(
        "cannot synthesise a prompt of exactly {target} tokens with tokenizer {tokenizer} (closest: {got})"
    )]
    InexactLength {
        target: usize,
        got: usize,
        tokenizer: String,
    },
    #[error("synthesising prompts: {0}")]
    Tokenizer(#[from] TokenizerError),
}
