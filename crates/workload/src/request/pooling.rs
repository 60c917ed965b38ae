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

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{BodySettings, BodyStyle, PreparedRequest};
use crate::workload::ApiKind;
use llmbench_data::Prompt;

/// One pooling request carrying `prompts` (at least one).
pub(crate) fn prepare_batch(prompts: &[Prompt], settings: &BodySettings) -> PreparedRequest {
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
