//! Request bodies of the pooling APIs (embeddings, rerank), built as each tool builds them. A pooling request
//! may carry several prompts (vLLM's `--random-batch-size`); its answer is vectors or scores, never tokens.
//!
//! - vLLM's bench (`vllm/benchmarks/lib/endpoint_request_func.py` at vllm-project/vllm 3aee4a4):
//!   `async_request_openai_embeddings` sends `{model, input, truncate_prompt_tokens: -1}` with `ignore_eos` and
//!   `--extra-body` merged (`_update_payload_common`); `input` is the prompt string, or the batch's list of
//!   strings when the dataset batches. `async_request_vllm_rerank` sends the batch's first prompt as `query`, the
//!   rest as `documents`, with `truncate_prompt_tokens: -1` and nothing merged.
//! - guidellm (`EmbeddingsRequestHandler.format`, `backends/openai/request_handlers.py` at vllm-project/guidellm
//!   ee7a774): `{model, input}` with the one text as a string, then `extras`; never streamed.
//! - AIPerf 0.13 (`aiperf/endpoints/openai_embeddings.py`, `EmbeddingsEndpoint._build_payload`): `{model,
//!   input: [texts]}` (always a list), then `--extra-inputs`.
//! - AIPerf 0.13's rankings endpoint types (`aiperf/endpoints/base_rankings_endpoint.py` `format_payload`, then
//!   each type's `build_payload`): one query and its passages per request — `nim_rankings` `{model, query: {text},
//!   passages: [{text}]}`, `cohere_rankings` `{model, query, documents}`, `hf_tei_rankings` `{query, texts}` (no
//!   model) — then `--extra-inputs` (`payload.update(extra)`).

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{BodySettings, BodyStyle, PreparedRequest};
use crate::workload::{ApiKind, RankingsWire};
use llmbench_data::Prompt;

/// One pooling request carrying `prompts` (at least one).
pub(crate) fn prepare_batch(prompts: &[Prompt], settings: &BodySettings) -> PreparedRequest {
    if let (ApiKind::Rerank, Some(wire), [prompt]) = (settings.api, settings.rankings, prompts) {
        return prepare_rankings(prompt, wire, settings);
    }
    let texts = || -> Vec<Value> {
        prompts
            .iter()
            .map(|p| Value::String(p.text.clone()))
            .collect()
    };
    let mut body = Map::new();
    body.insert("model".to_owned(), Value::String(settings.model.clone()));
    let mut merge_extra = true;
    match settings.api {
        ApiKind::Rerank => {
            // vLLM's rerank function asserts at least two prompts; a lone prompt (the pre-flight probe) ranks
            // itself against itself.
            let query = prompts.first().map(|p| p.text.clone()).unwrap_or_default();
            let documents: Vec<Value> = if prompts.len() > 1 {
                texts().split_off(1)
            } else {
                vec![Value::String(query.clone())]
            };
            body.insert("query".to_owned(), Value::String(query));
            body.insert("documents".to_owned(), Value::Array(documents));
            body.insert("truncate_prompt_tokens".to_owned(), json!(-1));
            // `async_request_vllm_rerank` calls no `_update_payload_common`: no ignore_eos, no extra body.
            merge_extra = false;
        }
        _ => {
            let input = match (settings.style, prompts) {
                (BodyStyle::Aiperf, _) => Value::Array(texts()),
                (BodyStyle::Vllm, [one]) if settings.inputs_per_request == 1 => {
                    Value::String(one.text.clone())
                }
                (BodyStyle::Vllm, _) => Value::Array(texts()),
                (_, [one]) => Value::String(one.text.clone()),
                _ => Value::Array(texts()),
            };
            body.insert("input".to_owned(), input);
            if settings.style == BodyStyle::Vllm {
                body.insert("truncate_prompt_tokens".to_owned(), json!(-1));
                if settings.ignore_eos {
                    body.insert("ignore_eos".to_owned(), Value::Bool(true));
                }
            }
        }
    }
    if merge_extra {
        for (key, value) in &settings.extra_body {
            body.insert(key.clone(), value.clone());
        }
    }
    let ignore_eos = body.get("ignore_eos") == Some(&Value::Bool(true));
    let inputs = match settings.api {
        // The documents are what a rerank scores.
        ApiKind::Rerank => prompts.len().saturating_sub(1).max(1),
        _ => prompts.len(),
    };
    PreparedRequest {
        body: Bytes::from(Value::Object(body).to_string()),
        input_tokens: prompts
            .iter()
            .fold(0u32, |sum, p| sum.saturating_add(p.input_tokens)),
        max_tokens: None,
        ignore_eos,
        header: None,
        inputs: Some(u32::try_from(inputs).unwrap_or(u32::MAX)),
        adapter: None,
        images: None,
    }
}

/// AIPerf's rankings request for `prompt`: its text the query, its passages the texts ranked, as many as it has
/// (none for an AIPerf file line without passages: AIPerf sends an empty list and warns), then the run's extra
/// inputs and the prompt's own extra fields (`payload.update(extra)`, `payload.update(turn.extra_body)`).
fn prepare_rankings(
    prompt: &Prompt,
    wire: RankingsWire,
    settings: &BodySettings,
) -> PreparedRequest {
    let passages: Vec<&str> = prompt.passages.iter().map(String::as_str).collect();
    let model = || Value::String(settings.model.clone());
    let mut body = Map::new();
    match wire {
        RankingsWire::Nim => {
            body.insert("model".to_owned(), model());
            body.insert("query".to_owned(), json!({"text": prompt.text}));
            body.insert(
                "passages".to_owned(),
                Value::Array(passages.iter().map(|p| json!({"text": p})).collect()),
            );
        }
        RankingsWire::Cohere => {
            body.insert("model".to_owned(), model());
            body.insert("query".to_owned(), json!(prompt.text));
            body.insert("documents".to_owned(), json!(passages));
        }
        RankingsWire::HfTei => {
            body.insert("query".to_owned(), json!(prompt.text));
            body.insert("texts".to_owned(), json!(passages));
        }
    }
    for (key, value) in settings
        .extra_body
        .iter()
        .chain(prompt.extra_body.iter().flatten())
    {
        body.insert(key.clone(), value.clone());
    }
    PreparedRequest {
        body: Bytes::from(Value::Object(body).to_string()),
        input_tokens: prompt.input_tokens,
        max_tokens: None,
        ignore_eos: false,
        header: None,
        inputs: Some(u32::try_from(passages.len()).unwrap_or(u32::MAX)),
        adapter: None,
        images: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(api: ApiKind, style: BodyStyle, per_request: u32) -> BodySettings {
        BodySettings {
            model: "m".to_owned(),
            api,
            streaming: false,
            ignore_eos: false,
            default_max_tokens: None,
            style,
            extra_body: Map::new(),
            logprobs: None,
            inputs_per_request: per_request,
            lora: None,
            rankings: None,
        }
    }

    fn prompts(n: usize) -> Vec<Prompt> {
        (0..n)
            .map(|i| Prompt::text(format!("p{i}"), 10 + i as u32, None))
            .collect()
    }

    fn body(request: &PreparedRequest) -> Value {
        serde_json::from_slice(&request.body).expect("json")
    }

    #[test]
    fn vllm_embeddings_send_a_string_alone_and_a_list_when_batched_with_the_last_batch_short() {
        let single = settings(ApiKind::Embeddings, BodyStyle::Vllm, 1);
        let one = crate::request::prepare_all(&prompts(1), &single);
        assert_eq!(
            body(&one[0]),
            json!({"model": "m", "input": "p0", "truncate_prompt_tokens": -1})
        );
        let mut batched = settings(ApiKind::Embeddings, BodyStyle::Vllm, 2);
        batched.ignore_eos = true;
        batched
            .extra_body
            .insert("encoding_format".to_owned(), json!("float"));
        let requests = crate::request::prepare_all(&prompts(5), &batched);
        assert_eq!(requests.len(), 3);
        assert_eq!(
            body(&requests[0]),
            json!({"model": "m", "input": ["p0", "p1"], "truncate_prompt_tokens": -1,
                   "ignore_eos": true, "encoding_format": "float"})
        );
        // The fifth prompt alone, still as a list: vLLM's batch path wraps every batch.
        assert_eq!(body(&requests[2])["input"], json!(["p4"]));
        let counts: Vec<_> = requests
            .iter()
            .map(|r| (r.inputs, r.input_tokens, r.max_tokens))
            .collect();
        assert_eq!(
            counts,
            [
                (Some(2), 21, None),
                (Some(2), 25, None),
                (Some(1), 14, None)
            ]
        );
    }

    #[test]
    fn vllm_rerank_sends_the_first_prompt_as_query_and_merges_nothing() {
        let mut s = settings(ApiKind::Rerank, BodyStyle::Vllm, 3);
        s.ignore_eos = true;
        s.extra_body.insert("top_n".to_owned(), json!(1));
        let requests = crate::request::prepare_all(&prompts(3), &s);
        assert_eq!(
            body(&requests[0]),
            json!({"model": "m", "query": "p0", "documents": ["p1", "p2"], "truncate_prompt_tokens": -1})
        );
        assert_eq!(
            (requests[0].inputs, requests[0].ignore_eos),
            (Some(2), false)
        );
    }

    fn ranking(passages: &[&str]) -> Prompt {
        Prompt {
            passages: passages.iter().map(|p| (*p).to_owned()).collect(),
            ..Prompt::text("q".to_owned(), 9, None)
        }
    }

    #[test]
    fn aiperf_rankings_bodies_are_each_endpoint_types_own_with_extra_inputs_last() {
        // The bodies of `build_payload` in `nim_rankings.py`, `cohere_rankings.py`, `hf_tei_rankings.py` (AIPerf
        // 0.13), then `payload.update(extra)`.
        let mut s = settings(ApiKind::Rerank, BodyStyle::Aiperf, 1);
        s.extra_body.insert("truncate".to_owned(), json!("END"));
        let cases = [
            (
                RankingsWire::Nim,
                json!({"model": "m", "query": {"text": "q"}, "passages": [{"text": "a"}, {"text": "b"}],
                       "truncate": "END"}),
            ),
            (
                RankingsWire::Cohere,
                json!({"model": "m", "query": "q", "documents": ["a", "b"], "truncate": "END"}),
            ),
            (
                RankingsWire::HfTei,
                json!({"query": "q", "texts": ["a", "b"], "truncate": "END"}),
            ),
        ];
        for (wire, expected) in cases {
            s.rankings = Some(wire);
            let requests = crate::request::prepare_all(&[ranking(&["a", "b"])], &s);
            assert_eq!(requests.len(), 1);
            assert_eq!(body(&requests[0]), expected, "{wire:?}");
            assert_eq!(
                (
                    requests[0].inputs,
                    requests[0].input_tokens,
                    requests[0].max_tokens
                ),
                (Some(2), 9, None)
            );
        }
        // A query without passages is sent with an empty list, as AIPerf's `build_payload` gets one; the line's
        // own `extra` goes over the run's extra inputs.
        s.rankings = Some(RankingsWire::HfTei);
        let mut lone = ranking(&[]);
        lone.extra_body = Some(
            json!({"truncate": "START", "raw_scores": true})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let request = crate::request::prepare(&lone, &s);
        assert_eq!(
            body(&request),
            json!({"query": "q", "texts": [], "truncate": "START", "raw_scores": true})
        );
        assert_eq!(request.inputs, Some(0));
    }

    #[test]
    fn guidellm_sends_one_string_and_aiperf_always_a_list() {
        let guidellm = prepare_batch(
            &prompts(1),
            &settings(ApiKind::Embeddings, BodyStyle::Guidellm, 1),
        );
        assert_eq!(body(&guidellm), json!({"model": "m", "input": "p0"}));
        let mut aiperf = settings(ApiKind::Embeddings, BodyStyle::Aiperf, 1);
        aiperf.extra_body.insert("dimensions".to_owned(), json!(8));
        assert_eq!(
            body(&prepare_batch(&prompts(1), &aiperf)),
            json!({"model": "m", "input": ["p0"], "dimensions": 8})
        );
    }
}
