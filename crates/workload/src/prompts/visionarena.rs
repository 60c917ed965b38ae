//! inference-perf's `visionarena` data from a local copy of `lmarena-ai/VisionArena-Chat`, as
//! `VisionArenaDataGenerator` (inference_perf/datagen/dataset/visionarena_datagen.py at kubernetes-sigs/inference-perf
//! 7de5ef2) builds its requests:
//!
//! - **Rows**: `load_dataset(hf_dataset_name, streaming=True, split=hf_split)` on a directory: the split's files as
//!   `datasets` finds them (see [`super::vllm_hf`]), in path order, each file's rows in order (no shuffle).
//! - **Pool** (`_build_pool`): the first `num_rows` usable rows. A row is usable when its `conversation` (turns, each
//!   a list of `{role, content}` messages or one message) has a `user` message whose `content` is text with a
//!   non-space character, the first such being the prompt, and when at least one of its first
//!   `max_images_per_request` `images` is an image Pillow opens as PNG, JPEG or WEBP from stored bytes
//!   (`_process_image`; see [`llmbench_data::image::pre_encoded_image`]). Those images, in order, go with the prompt.
//!   A row of a JSON file has no bytes (`datasets` gives its `bytes` as text), so none is usable; a Parquet file whose
//!   `datasets` features decode the images (an `Image` feature without `decode: false`) is refused, as upstream then
//!   re-encodes each image as a PNG through Pillow, which llmbench cannot do byte for byte.
//! - **Requests** (`load_lazy_data`): request `data_index` of a stage (counted from 0 in each stage, as `get_data`
//!   starts again) sends `pool[data_index % len(pool)]`: one user message of the prompt with each image as an
//!   `image_url` part at its insertion point (`assemble_content`), the point `insertion_point` or, when `null` or a
//!   `uniform` distribution, a draw per image from `np.random.default_rng(data_index)`; `max_tokens` the client's
//!   default, 30.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::PromptError;
use super::vllm_hf::{self, HfKeys, Row};
use crate::workload::{ArenaPoint, VisionArenaData};
use llmbench_data::image::{ImageInput, ImagePlace, pre_encoded_image};
use llmbench_data::{DataError, Prompt};
use llmbench_text::numpy_generator::NumpyGenerator;
use llmbench_text::tokenizer::Tokenizer;

/// inference-perf's `hf_dataset_name` and `hf_split`.
const KEYS: HfKeys = HfKeys {
    path: "hf_dataset_name",
    split: "hf_split",
};

/// `OpenAIModelServerClient.max_completion_tokens`: what a request without its own length asks for.
const CLIENT_MAX_TOKENS: u32 = 30;

/// One usable row of the pool: its prompt and its images, as stored.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub(super) prompt: String,
    pub(super) images: Vec<ImageInput>,
}

/// The requests of `va`: with a fixed insertion point, one per pool entry (request `i` is entry `i % len`); with
/// drawn points, `requests` rounded up to a whole number of pools, request `i`'s points drawn from
/// `default_rng(i)`.
pub(super) fn visionarena_prompts(
    va: &VisionArenaData,
    tokenizer: &Tokenizer,
    requests: usize,
) -> Result<Vec<Prompt>, PromptError> {
    let pool = pool(va)?;
    let mut prompts = Vec::with_capacity(pool.len());
    let count = match va.insertion_point {
        ArenaPoint::At(_) => pool.len(),
        ArenaPoint::Uniform | ArenaPoint::UniformInts { .. } => {
            requests.max(1).div_ceil(pool.len()) * pool.len()
        }
    };
    let mut texts: Vec<Option<Prompt>> = vec![None; pool.len()];
    for index in 0..count {
        let entry = &pool[index % pool.len()];
        let text = match &texts[index % pool.len()] {
            Some(prompt) => prompt.clone(),
            None => {
                let n = tokenizer
                    .count(&entry.prompt)
                    .map_err(|source| DataError::Tokenize {
                        path: PathBuf::from(&va.path),
                        row: format!("pool entry {}", index % pool.len()),
                        source,
                    })?;
                let prompt = Prompt::text(entry.prompt.clone(), n, Some(CLIENT_MAX_TOKENS));
                texts[index % pool.len()] = Some(prompt.clone());
                prompt
            }
        };
        let mut prompt = text;
        prompt.images = placed(entry, va.insertion_point, index as u64);
        prompts.push(prompt);
    }
    Ok(prompts)
}

/// `entry`'s images with their insertion points for request `data_index` (`sample_insertion_point`, one draw per
/// image in order from `default_rng(data_index)`).
pub(super) fn placed(entry: &Entry, point: ArenaPoint, data_index: u64) -> Vec<ImageInput> {
    let mut rng = NumpyGenerator::seed(data_index);
    entry
        .images
        .iter()
        .map(|image| {
            let point = match point {
                ArenaPoint::At(p) => p,
                ArenaPoint::Uniform => rng.random(),
                ArenaPoint::UniformInts { min, max } => {
                    let (low, high) = (min as f64, max as f64);
                    let sample = low + (high + 1.0 - low) * rng.random();
                    sample.clamp(low, high).round_ties_even()
                }
            };
            ImageInput {
                place: Some(ImagePlace {
                    point,
                    in_prefix: false,
                    prefix_chars: None,
                }),
                ..image.clone()
            }
        })
        .collect()
}

/// `_build_pool`: the first `num_rows` usable rows of the split, in file order.
pub(super) fn pool(va: &VisionArenaData) -> Result<Vec<Entry>, PromptError> {
    let root = Path::new(&va.path);
    let files = vllm_hf::split_files(root, &va.split, KEYS)?;
    let limit = usize::try_from(va.num_rows).unwrap_or(usize::MAX);
    let max_images = usize::try_from(va.max_images_per_request).unwrap_or(usize::MAX);
    let mut pool = Vec::new();
    for (i, file) in files.iter().enumerate() {
        if pool.len() >= limit {
            break;
        }
        let bytes_column = images_hold_bytes(file)?;
        for row in vllm_hf::read_rows(file, i)? {
            if pool.len() >= limit {
                break;
            }
            if let Some(entry) = entry(&row, bytes_column, max_images) {
                pool.push(entry);
            }
        }
    }
    if pool.is_empty() {
        return Err(DataError::NoPrompts {
            path: root.to_owned(),
            reason: format!(
                "VisionArena pool is empty: no usable rows found in split '{}'. Each usable row needs a user-turn \
                 prompt and at least one decodable image (PNG, JPEG or WEBP bytes in a Parquet file's `images`), \
                 as inference-perf says",
                va.split
            ),
        }
        .into());
    }
    Ok(pool)
}

/// Whether `file`'s `images` hold bytes `datasets` hands out undecoded: a Parquet file whose `images[].bytes` column
/// is binary. A JSON file's are text. A Parquet file whose features decode the images is refused.
fn images_hold_bytes(file: &Path) -> Result<bool, PromptError> {
    if !vllm_hf::is_parquet(file) {
        return Ok(false);
    }
    if let Some(metadata) = llmbench_data::parquet_metadata(file, "huggingface")? {
        let features = serde_json::from_str::<Value>(&metadata)
            .ok()
            .and_then(|v| v.pointer("/info/features/images").cloned());
        if let Some(images) = features
            && decodes_images(&images)
        {
            return Err(DataError::Shape {
                path: file.to_owned(),
                message: "its `datasets` features declare `images` as an `Image` feature that decodes (no \
                          `decode: false`): inference-perf then gets Pillow images and sends each re-encoded as a \
                          PNG, which llmbench does not reproduce; use files whose features keep the stored bytes \
                          (`Image(decode=False)`, as the Hub's VisionArena-Chat declares them)"
                    .to_owned(),
            }
            .into());
        }
    }
    Ok(llmbench_data::parquet_binary_columns(file)?
        .iter()
        .any(|column| column.starts_with("images.") && column.ends_with(".bytes")))
}

/// Whether a `datasets` feature (as the `huggingface` Parquet metadata writes it) holds an `Image` that decodes.
fn decodes_images(feature: &Value) -> bool {
    match feature {
        Value::Object(map) => {
            if map.get("_type").and_then(Value::as_str) == Some("Image") {
                return map.get("decode").and_then(Value::as_bool) != Some(false);
            }
            map.values().any(decodes_images)
        }
        Value::Array(items) => items.iter().any(decodes_images),
        _ => false,
    }
}

/// `_row_to_entry`: the row's prompt and its first `max_images` images that can be sent, or `None` for a row the
/// pool leaves out.
fn entry(row: &Row, bytes_column: bool, max_images: usize) -> Option<Entry> {
    let prompt = first_user_prompt(row.record.get("conversation")?)?;
    // `row.get("images") or []`, which must then be a list.
    let images = match row.record.get("images") {
        None | Some(Value::Null) => return None,
        Some(Value::Array(images)) => images,
        Some(_) => return None,
    };
    let images: Vec<ImageInput> = images
        .iter()
        .take(max_images)
        .filter_map(|image| {
            // `isinstance(img.get("bytes"), (bytes, bytearray))`: only a binary column holds bytes.
            let stored = image.get("bytes").and_then(Value::as_str)?;
            if !bytes_column {
                return None;
            }
            pre_encoded_image(stored)
        })
        .collect();
    (!images.is_empty()).then(|| Entry {
        prompt: prompt.to_owned(),
        images,
    })
}

/// `_extract_prompt`: the first `user` message's content that is text holding a non-space character (Python's
/// `str.strip`), each turn a list of messages or one message.
pub(super) fn first_user_prompt(conversation: &Value) -> Option<&str> {
    let Value::Array(turns) = conversation else {
        return None;
    };
    turns
        .iter()
        .flat_map(|turn| match turn {
            Value::Array(messages) => messages.iter().collect::<Vec<_>>(),
            other => vec![other],
        })
        .filter(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .filter_map(|message| message.get("content").and_then(Value::as_str))
        .find(|content| content.chars().any(|c| !python_space(c)))
}

/// Python's `str.isspace`: Unicode white space and the information separators `\x1c`‥`\x1f`.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests;
