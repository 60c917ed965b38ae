//! The pooling routes, as vLLM serves them for an embedding or cross-encoder model: `/v1/embeddings` and
//! `/pooling` (one vector per input), `/v1/rerank`, `/rerank`, `/v2/rerank` (a relevance score per document) and
//! `/v1/score` (a score per text pair); and NVIDIA NIM's `/v1/ranking` (`{query: {text}, passages: [{text}]}` in,
//! `{rankings: [{index, logit}]}` out), which AIPerf's `nim_rankings` endpoint type sends. The request is read only as far as counting its inputs and their words;
//! the answer is a well-formed body of small fixed vectors or scores with `usage.prompt_tokens`. A pooling request
//! is prefill alone: the engine times it as a request for one token (the time to first token), never streamed;
//! `/metrics` counts it as such (one generation token), where vLLM counts a pooling request's prompt only.

use serde::{Deserialize, Serialize};

use super::openai::{ChunkHeader, Prompt};
use llmbench_text::tokenizer::word_count;

/// Every vector the simulator answers has this many dimensions, whatever the inputs (a small model's).
pub(crate) const EMBEDDING_DIMENSIONS: usize = 8;

/// Which pooling route a request came in on: it decides the request's fields and the answer's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PoolingRoute {
    Embeddings,
    Pooling,
    Rerank,
    Score,
    /// NIM's `/v1/ranking`.
    Ranking,
}

impl PoolingRoute {
    pub(crate) fn id_prefix(self) -> &'static str {
        match self {
            PoolingRoute::Embeddings => "embd-",
            PoolingRoute::Pooling => "pool-",
            PoolingRoute::Rerank => "rerank-",
            PoolingRoute::Score => "score-",
            PoolingRoute::Ranking => "ranking-",
        }
    }
}

/// `/v1/embeddings` and `/pooling`: `input` as the completions `prompt` is (a string, token ids, or a batch of
/// either).
#[derive(Debug, Deserialize)]
pub(crate) struct EmbeddingsRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub input: Prompt,
}

/// The rerank routes: a query and its documents (`texts` is Hugging Face TEI's name for them).
#[derive(Debug, Deserialize)]
pub(crate) struct RerankRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub query: String,
    #[serde(default, alias = "texts")]
    pub documents: Vec<String>,
    #[serde(default)]
    pub top_n: Option<usize>,
}

/// NIM's `/v1/ranking`: a query and its passages, each a `{text}` object.
#[derive(Debug, Deserialize)]
pub(crate) struct RankingRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub query: RankingText,
    pub passages: Vec<RankingText>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RankingText {
    pub text: String,
}

impl RankingRequest {
    /// As a rerank of the passages' texts: a cross-encoder reads each passage beside the query.
    pub(crate) fn inputs(&self) -> Result<PoolingInputs, String> {
        RerankRequest {
            model: None,
            query: self.query.text.clone(),
            documents: self.passages.iter().map(|p| p.text.clone()).collect(),
            top_n: None,
        }
        .inputs()
        .map_err(|_| "passages must not be empty".to_owned())
    }
}

/// `/v1/score`: `text_1` against each of `text_2`, or pair by pair when both are lists of one length.
#[derive(Debug, Deserialize)]
pub(crate) struct ScoreRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(alias = "queries")]
    pub text_1: OneOrMany,
    #[serde(alias = "documents")]
    pub text_2: OneOrMany,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn words(&self) -> Vec<usize> {
        match self {
            OneOrMany::One(text) => vec![word_count(text)],
            OneOrMany::Many(texts) => texts.iter().map(|t| word_count(t)).collect(),
        }
    }
}

/// What the engine needs of a pooling request: each input's tokens (a rerank or score input is its pair).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolingInputs {
    pub tokens: Vec<u32>,
    /// Results a rerank answers with (`top_n`), all of them otherwise.
    pub answered: usize,
}

impl PoolingInputs {
    /// Every input's tokens together: what the request costs and `usage.prompt_tokens` reports.
    pub(crate) fn total(&self) -> u32 {
        self.tokens
            .iter()
            .fold(0u32, |sum, t| sum.saturating_add(*t))
    }

    /// The longest input, which alone must fit the model's context.
    pub(crate) fn longest(&self) -> u32 {
        self.tokens.iter().copied().max().unwrap_or(0)
    }
}

fn saturate(count: usize) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

impl EmbeddingsRequest {
    pub(crate) fn inputs(&self) -> Result<PoolingInputs, String> {
        let tokens: Vec<u32> = match &self.input {
            Prompt::Text(text) => vec![saturate(word_count(text))],
            Prompt::TokenIds(ids) if ids.is_empty() => Vec::new(),
            Prompt::TokenIds(ids) => vec![saturate(ids.len())],
            Prompt::Texts(texts) => texts.iter().map(|t| saturate(word_count(t))).collect(),
            Prompt::TokenIdBatches(batches) => batches.iter().map(|b| saturate(b.len())).collect(),
        };
        if tokens.is_empty() {
            return Err("input must not be empty".to_owned());
        }
        let answered = tokens.len();
        Ok(PoolingInputs { tokens, answered })
    }
}

impl RerankRequest {
    pub(crate) fn inputs(&self) -> Result<PoolingInputs, String> {
        if self.documents.is_empty() {
            return Err("documents must not be empty".to_owned());
        }
        // A cross-encoder reads each document beside the query.
        let query = word_count(&self.query);
        let tokens: Vec<u32> = self
            .documents
            .iter()
            .map(|d| saturate(query + word_count(d)))
            .collect();
        let answered = self
            .top_n
            .filter(|n| *n > 0)
            .unwrap_or(tokens.len())
            .min(tokens.len());
        Ok(PoolingInputs { tokens, answered })
    }
}

impl ScoreRequest {
    pub(crate) fn inputs(&self) -> Result<PoolingInputs, String> {
        let (first, second) = (self.text_1.words(), self.text_2.words());
        let tokens: Vec<u32> = match (first.as_slice(), second.as_slice()) {
            (_, []) => return Err("text_2 must not be empty".to_owned()),
            ([one], many) => many.iter().map(|d| saturate(one + d)).collect(),
            (pairs, others) if pairs.len() == others.len() => pairs
                .iter()
                .zip(others)
                .map(|(a, b)| saturate(a + b))
                .collect(),
            (pairs, others) => {
                return Err(format!(
                    "text_1 and text_2 must have one text or as many texts each, got {} and {}",
                    pairs.len(),
                    others.len()
                ));
            }
        };
        let answered = tokens.len();
        Ok(PoolingInputs { tokens, answered })
    }
}

#[derive(Serialize)]
struct PoolingUsage {
    prompt_tokens: u32,
    total_tokens: u32,
    completion_tokens: u32,
}

#[derive(Serialize)]
struct VectorsBody<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    data: Vec<VectorItem>,
    usage: PoolingUsage,
}

/// One input's vector: `embedding` for `/v1/embeddings`, `data` for `/pooling` (vLLM's `PoolingResponseData`).
#[derive(Serialize)]
struct VectorItem {
    index: usize,
    object: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding: Option<[f32; EMBEDDING_DIMENSIONS]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<[f32; EMBEDDING_DIMENSIONS]>,
}

#[derive(Serialize)]
struct RerankBody<'a> {
    id: &'a str,
    model: &'a str,
    usage: RerankUsage,
    results: Vec<RerankResult>,
}

/// vLLM's `RerankUsage`.
#[derive(Serialize)]
struct RerankUsage {
    prompt_tokens: u32,
    total_tokens: u32,
}

/// A document's score, without the document's text, as llama.cpp's server answers unless asked to return it.
#[derive(Serialize)]
struct RerankResult {
    index: usize,
    relevance_score: f64,
}

/// NIM's ranking answer: every passage's logit, best first, and the usage.
#[derive(Serialize)]
struct RankingBody {
    rankings: Vec<RankingItem>,
    usage: RerankUsage,
}

#[derive(Serialize)]
struct RankingItem {
    index: usize,
    logit: f64,
}

#[derive(Serialize)]
struct ScoreItem {
    index: usize,
    object: &'static str,
    score: f64,
}

#[derive(Serialize)]
struct ScoreBody<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    data: Vec<ScoreItem>,
    usage: PoolingUsage,
}

/// A unit vector, the same for every input: the simulator has no model to embed with.
const UNIT: [f32; EMBEDDING_DIMENSIONS] = [0.353_553_38; EMBEDDING_DIMENSIONS];

/// The `i`th input's score: falling with the index, so a rerank's results (best first) keep the documents' order.
fn score(i: usize) -> f64 {
    1.0 / (i as f64 + 2.0)
}

/// The whole answer to a pooling request with `inputs` inputs of `prompt_tokens` tokens in all.
pub(crate) fn answer_body(
    route: PoolingRoute,
    header: &ChunkHeader<'_>,
    prompt_tokens: u32,
    inputs: usize,
) -> Vec<u8> {
    let usage = PoolingUsage {
        prompt_tokens,
        total_tokens: prompt_tokens,
        completion_tokens: 0,
    };
    let result = match route {
        PoolingRoute::Embeddings | PoolingRoute::Pooling => {
            let pooling = route == PoolingRoute::Pooling;
            serde_json::to_vec(&VectorsBody {
                id: header.id,
                object: "list",
                created: header.created,
                model: header.model,
                data: (0..inputs)
                    .map(|index| VectorItem {
                        index,
                        object: if pooling { "pooling" } else { "embedding" },
                        embedding: (!pooling).then_some(UNIT),
                        data: pooling.then_some(UNIT),
                    })
                    .collect(),
                usage,
            })
        }
        PoolingRoute::Rerank => serde_json::to_vec(&RerankBody {
            id: header.id,
            model: header.model,
            usage: RerankUsage {
                prompt_tokens,
                total_tokens: prompt_tokens,
            },
            results: (0..inputs)
                .map(|index| RerankResult {
                    index,
                    relevance_score: score(index),
                })
                .collect(),
        }),
        PoolingRoute::Ranking => serde_json::to_vec(&RankingBody {
            rankings: (0..inputs)
                .map(|index| RankingItem {
                    index,
                    logit: score(index),
                })
                .collect(),
            usage: RerankUsage {
                prompt_tokens,
                total_tokens: prompt_tokens,
            },
        }),
        PoolingRoute::Score => serde_json::to_vec(&ScoreBody {
            id: header.id,
            object: "list",
            created: header.created,
            model: header.model,
            data: (0..inputs)
                .map(|index| ScoreItem {
                    index,
                    object: "score",
                    score: score(index),
                })
                .collect(),
            usage,
        }),
    };
    // Serialising these plain structs into a Vec cannot fail.
    result.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: serde::de::DeserializeOwned>(json: &str) -> T {
        serde_json::from_str(json).expect("a request")
    }

    #[test]
    fn inputs_are_counted_per_input_and_a_pair_reads_both_texts() {
        let batch: EmbeddingsRequest = parse(r#"{"input": ["a b", "c d e"]}"#);
        let inputs = batch.inputs().expect("valid");
        assert_eq!(
            (inputs.total(), inputs.longest(), inputs.answered),
            (5, 3, 2)
        );
        let rerank: RerankRequest = parse(r#"{"query": "q r", "texts": ["a", "b c"], "top_n": 1}"#);
        let inputs = rerank.inputs().expect("valid");
        assert_eq!((inputs.tokens.clone(), inputs.answered), (vec![3, 4], 1));
        let score: ScoreRequest = parse(r#"{"text_1": ["a", "b"], "text_2": ["c d", "e"]}"#);
        assert_eq!(score.inputs().expect("valid").tokens, [3, 2]);
        let empty: EmbeddingsRequest = parse(r#"{"input": []}"#);
        assert!(empty.inputs().is_err());
    }

    #[test]
    fn a_nim_ranking_counts_each_passage_beside_the_query_and_answers_logits() {
        let ranking: RankingRequest = parse(
            r#"{"model": "m", "query": {"text": "q r"}, "passages": [{"text": "a"}, {"text": "b c"}]}"#,
        );
        let inputs = ranking.inputs().expect("valid");
        assert_eq!((inputs.tokens.clone(), inputs.answered), (vec![3, 4], 2));
        let empty: RankingRequest = parse(r#"{"query": {"text": "q"}, "passages": []}"#);
        assert!(empty.inputs().is_err());
        let header = ChunkHeader {
            endpoint: super::super::openai::Endpoint::Pooling {
                route: PoolingRoute::Ranking,
                inputs: 2,
            },
            id: "ranking-1",
            created: 0,
            model: "m",
        };
        let answer: serde_json::Value =
            serde_json::from_slice(&answer_body(PoolingRoute::Ranking, &header, 7, 2))
                .expect("json");
        assert_eq!(
            answer,
            serde_json::json!({"rankings": [{"index": 0, "logit": 0.5}, {"index": 1, "logit": 1.0 / 3.0}],
                               "usage": {"prompt_tokens": 7, "total_tokens": 7}})
        );
    }

    #[test]
    fn a_rerank_answer_has_a_score_per_answered_document_and_the_prompt_tokens() {
        let header = ChunkHeader {
            endpoint: super::super::openai::Endpoint::Pooling {
                route: PoolingRoute::Rerank,
                inputs: 2,
            },
            id: "rerank-1",
            created: 0,
            model: "m",
        };
        let body: serde_json::Value =
            serde_json::from_slice(&answer_body(PoolingRoute::Rerank, &header, 7, 2))
                .expect("json");
        assert_eq!(
            body["usage"],
            serde_json::json!({"prompt_tokens": 7, "total_tokens": 7})
        );
        assert_eq!(body["results"].as_array().map(Vec::len), Some(2));
        let embeddings: serde_json::Value =
            serde_json::from_slice(&answer_body(PoolingRoute::Embeddings, &header, 7, 3))
                .expect("json");
        assert_eq!(
            embeddings["data"][2]["embedding"].as_array().map(Vec::len),
            Some(EMBEDDING_DIMENSIONS)
        );
        assert_eq!(embeddings["usage"]["completion_tokens"], 0);
    }
}
