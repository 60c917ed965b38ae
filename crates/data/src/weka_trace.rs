//! WEKA KV-cache-tester agent traces, compiled into calls as inference-perf compiles them
//! (`inference_perf/datagen/replay/weka_trace_replay_datagen.py`, kubernetes-sigs/inference-perf 7de5ef2).
//!
//! A trace is one agent session: its top-level requests (`type` `n` or `s`) are the parent's turns, each
//! `subagent` entry a sub-agent whose requests are packed into streams of non-overlapping calls (a stream is
//! reused once its last call has ended, else a new one opens). Each request records its prompt as block hash ids
//! of `block_size` tokens; the text of a hash id is `block_size` tokens cut from the tokenized corpus at an offset
//! drawn by a `random.Random` seeded with the first 8 bytes of `sha256("{base_seed}:{trace_id}:{hash_id}")`, so
//! equal hash ids are equal text and the server's prefix cache sees the trace's hits. A turn keeps the history up
//! to the longest common prefix of its hash ids with the previous turn's (cutting the previous turn's partial tail
//! block when the prefix ends right there), then its new blocks: the first `ceil(prev_out / block_size)` of them
//! as the assistant's answer, the rest (with tokens for missing blocks and the partial tail from
//! `sha256(seed)`-placed corpus slices) as the user's message. A turn's recorded output is that assistant text of
//! the next turn (the last turn's is a corpus slice), which is how the replay graph links each turn to the one
//! before. Start times are the recorded ones with every idle gap between request starts longer than
//! `trace_idle_gap_cap_seconds` shortened to it (when the cap is positive).
//!
//! Pure apart from the decoder the caller hands in; the caller builds the replay graph of the calls.

use std::collections::HashMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use llmbench_text::py_random::PyRandom;

use crate::ChatMessage;

/// The instruction line inference-perf puts before the corpus text it tokenizes.
pub const CORPUS_BASE_PROMPT: &str = "Pick as many lines as you can from these poem lines:\n";

/// One trace (`WekaTrace`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WekaTrace {
    pub id: String,
    pub models: Vec<String>,
    pub block_size: i64,
    #[serde(default)]
    pub tool_tokens: i64,
    #[serde(default)]
    pub system_tokens: i64,
    pub requests: Vec<WekaRequest>,
}

/// A top-level entry (`WekaRequest`, discriminated by `type`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub enum WekaRequest {
    #[serde(rename = "n")]
    Normal(WekaTurn),
    #[serde(rename = "s")]
    Streaming(WekaTurn),
    #[serde(rename = "subagent")]
    Subagent(WekaSubagent),
}

/// One recorded model call (`WekaNormalRequest`/`WekaStreamingRequest`; `ttft` is not read).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WekaTurn {
    pub t: f64,
    pub model: String,
    #[serde(rename = "in")]
    pub input_length: i64,
    #[serde(rename = "out")]
    pub output_length: i64,
    #[serde(default)]
    pub hash_ids: Vec<i64>,
    pub api_time: Option<f64>,
    /// Validated, never read upstream.
    pub think_time: Option<f64>,
}

/// A sub-agent (`WekaSubagentEntry`); its requests must all be `type: n`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WekaSubagent {
    pub t: f64,
    pub agent_id: String,
    pub subagent_type: String,
    pub duration_ms: Option<i64>,
    #[serde(default)]
    pub requests: Vec<SubagentRequest>,
    #[serde(default)]
    pub tool_tokens: i64,
    #[serde(default)]
    pub system_tokens: i64,
}

/// A sub-agent's request: pydantic's `List[WekaNormalRequest]` takes `type: n` only.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub enum SubagentRequest {
    #[serde(rename = "n")]
    Normal(WekaTurn),
}

impl SubagentRequest {
    fn turn(&self) -> &WekaTurn {
        let SubagentRequest::Normal(turn) = self;
        turn
    }
}

/// Why a trace cannot be compiled (upstream raises, and skips the trace under `skip_invalid_files`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WekaError {
    #[error("not a WEKA trace: {0}")]
    Invalid(String),
    #[error("trace `{trace}`: block size {block_size} is not positive")]
    BlockSize { trace: String, block_size: i64 },
    #[error("the prompt corpus tokenizes to no tokens")]
    EmptyCorpus,
    #[error("trace `{trace}`: cannot decode corpus tokens: {why}")]
    Decode { trace: String, why: String },
}

/// Reads one trace from its JSON text.
pub fn parse_trace(text: &str) -> Result<WekaTrace, WekaError> {
    serde_json::from_str(text).map_err(|e| WekaError::Invalid(e.to_string()))
}

/// The settings a trace is compiled with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compile {
    /// The generator's `base_seed` (inference-perf's `load.base_seed`).
    pub base_seed: u64,
    /// `default_block_size`: used when the trace's `block_size` is 0.
    pub default_block_size: i64,
    /// `trace_idle_gap_cap_seconds`; 0 or less keeps the recorded times.
    pub idle_gap_cap_seconds: f64,
}

/// One compiled call (`RawCall`), in the order inference-perf sorts them: by start, then id.
#[derive(Debug, Clone, PartialEq)]
pub struct WekaCall {
    /// `parent_turn_{k}`, or `sa_{agent_id}_s{stream}_turn_{k}`.
    pub id: String,
    pub t_start_ms: i64,
    pub t_end_ms: i64,
    pub messages: Vec<ChatMessage>,
    /// The recorded answer: the assistant text the next turn of its stream carries.
    pub output: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// Compiles `trace` into its calls (`_reconstruct_raw_calls`); `corpus` is the tokenized prompt corpus and
/// `decode` the tokenizer's decoder.
pub fn compile<E: std::fmt::Display>(
    trace: &WekaTrace,
    settings: &Compile,
    corpus: &[u32],
    decode: &mut dyn FnMut(&[u32]) -> Result<String, E>,
) -> Result<Vec<WekaCall>, WekaError> {
    if corpus.is_empty() {
        return Err(WekaError::EmptyCorpus);
    }
    let block_size = if trace.block_size != 0 {
        trace.block_size
    } else {
        settings.default_block_size
    };
    if block_size <= 0 {
        return Err(WekaError::BlockSize {
            trace: trace.id.clone(),
            block_size,
        });
    }
    let mut decode = |tokens: &[u32]| {
        decode(tokens).map_err(|e| WekaError::Decode {
            trace: trace.id.clone(),
            why: e.to_string(),
        })
    };
    let mut blocks = Blocks {
        corpus,
        base_seed: settings.base_seed,
        trace_id: &trace.id,
        block_size,
        cache: HashMap::new(),
    };

    let normals: Vec<&WekaTurn> = trace
        .requests
        .iter()
        .filter_map(|r| match r {
            WekaRequest::Normal(t) | WekaRequest::Streaming(t) => Some(t),
            WekaRequest::Subagent(_) => None,
        })
        .collect();
    let mut children: Vec<Stream<'_>> = Vec::new();
    for entry in trace.requests.iter().filter_map(|r| match r {
        WekaRequest::Subagent(s) => Some(s),
        _ => None,
    }) {
        let mut streams = pack_into_streams(entry.requests.iter().map(SubagentRequest::turn));
        if streams.is_empty() {
            streams.push(Vec::new());
        }
        let multi = streams.len() > 1;
        for (index, turns) in streams.into_iter().enumerate() {
            let mut session_id = format!("{}::sa:{}", trace.id, entry.agent_id);
            if multi {
                session_id.push_str(&format!(":s{index}"));
            }
            children.push(Stream {
                session_id,
                entry,
                index,
                turns,
            });
        }
    }

    // `_build_trace_idle_timing`: every request start of the trace (parent and sub-agents) sets the warp.
    let absolute = |entry: &WekaSubagent, turn: &WekaTurn| {
        // `_subagent_request_absolute_t`: a time before the sub-agent's own is relative to it.
        if turn.t + 1e-6 < entry.t {
            entry.t + turn.t
        } else {
            turn.t
        }
    };
    let warp = (settings.idle_gap_cap_seconds > 0.0).then(|| {
        let starts: Vec<f64> = normals
            .iter()
            .map(|t| t.t)
            .chain(
                children
                    .iter()
                    .flat_map(|c| c.turns.iter().map(|t| absolute(c.entry, t))),
            )
            .collect();
        IdleGapWarp::new(starts, settings.idle_gap_cap_seconds)
    });
    let at = |t: f64| warp.as_ref().map_or(t, |w| w.map(t));

    let mut calls = Vec::new();
    let parent_turns: Vec<(f64, &WekaTurn)> = normals.iter().map(|t| (at(t.t), *t)).collect();
    reconstruct(
        &mut calls,
        &mut blocks,
        &mut decode,
        &Conversation {
            turns: &parent_turns,
            tool_tokens: trace.tool_tokens,
            system_tokens: trace.system_tokens,
            seed_prefix: &trace.id,
            final_seed: format!("{}:final_parent_turn_completion", trace.id),
            call_id: &|k| format!("parent_turn_{k}"),
        },
    )?;
    for child in &children {
        let turns: Vec<(f64, &WekaTurn)> = child
            .turns
            .iter()
            .map(|t| (at(absolute(child.entry, t)), *t))
            .collect();
        let call_id = |k: usize| format!("sa_{}_s{}_turn_{k}", child.entry.agent_id, child.index);
        reconstruct(
            &mut calls,
            &mut blocks,
            &mut decode,
            &Conversation {
                turns: &turns,
                tool_tokens: child.entry.tool_tokens,
                system_tokens: child.entry.system_tokens,
                seed_prefix: &child.session_id,
                final_seed: format!("{}:final_turn_completion", child.session_id),
                call_id: &call_id,
            },
        )?;
    }
    // `all_calls.sort(key=lambda c: (c.t_start_ms, c.call_id))`.
    calls.sort_by(|a, b| {
        a.t_start_ms
            .cmp(&b.t_start_ms)
            .then_with(|| a.id.cmp(&b.id))
    });
    Ok(calls)
}

/// A sub-agent's stream of calls (`_ChildPlan`).
struct Stream<'a> {
    session_id: String,
    entry: &'a WekaSubagent,
    index: usize,
    turns: Vec<&'a WekaTurn>,
}

/// `_pack_into_streams`: by start (stably), each request into the first stream whose last call has ended by then.
fn pack_into_streams<'a>(requests: impl Iterator<Item = &'a WekaTurn>) -> Vec<Vec<&'a WekaTurn>> {
    let mut sorted: Vec<&WekaTurn> = requests.collect();
    sorted.sort_by(|a, b| a.t.total_cmp(&b.t));
    let mut streams: Vec<Vec<&WekaTurn>> = Vec::new();
    let mut ends: Vec<f64> = Vec::new();
    for r in sorted {
        let end = r.t + r.api_time.unwrap_or(0.0);
        match ends.iter().position(|&e| e <= r.t) {
            Some(i) => {
                streams[i].push(r);
                ends[i] = end;
            }
            None => {
                streams.push(vec![r]);
                ends.push(end);
            }
        }
    }
    streams
}

#[derive(Debug, Clone, Copy)]
struct IdleGap {
    raw_start: f64,
    raw_end: f64,
    shift_before: f64,
    cap: f64,
    excess: f64,
}

/// `_IdleGapTimeWarp`: gaps between consecutive (sorted) request starts longer than the cap shortened to it.
struct IdleGapWarp {
    gaps: Vec<IdleGap>,
}

impl IdleGapWarp {
    fn new(mut starts: Vec<f64>, cap: f64) -> Self {
        starts.sort_by(f64::total_cmp);
        let mut gaps = Vec::new();
        let mut shift = 0.0;
        for pair in starts.windows(2) {
            let gap = pair[1] - pair[0];
            if gap > cap {
                let excess = gap - cap;
                gaps.push(IdleGap {
                    raw_start: pair[0],
                    raw_end: pair[1],
                    shift_before: shift,
                    cap,
                    excess,
                });
                shift += excess;
            }
        }
        IdleGapWarp { gaps }
    }

    fn map(&self, t: f64) -> f64 {
        let mut shift = 0.0;
        for gap in &self.gaps {
            if t < gap.raw_start {
                return t - gap.shift_before;
            }
            if t < gap.raw_end {
                if t - gap.raw_start <= gap.cap {
                    return t - gap.shift_before;
                }
                return gap.raw_start - gap.shift_before + gap.cap;
            }
            shift = gap.shift_before + gap.excess;
        }
        t - shift
    }
}

/// The text of hash-id blocks and synthetic tails, cut from the corpus (the datagen's closures).
struct Blocks<'a> {
    corpus: &'a [u32],
    base_seed: u64,
    trace_id: &'a str,
    block_size: i64,
    /// Per trace, as upstream clears its cache for each.
    cache: HashMap<i64, Vec<u32>>,
}

fn sha256_u64(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// `corpus[start:end]` with Python's clamping of non-negative bounds.
fn slice(tokens: &[u32], start: i64, end: i64) -> &[u32] {
    let len = tokens.len() as i64;
    let start = start.clamp(0, len) as usize;
    let end = end.clamp(0, len) as usize;
    if start >= end {
        &[]
    } else {
        &tokens[start..end]
    }
}

impl Blocks<'_> {
    /// `decode_block_tokens`: `block_size` tokens from a `sha256`-seeded `randrange(len(corpus))`, wrapping once.
    fn tokens(&mut self, hash_ids: &[i64]) -> Vec<u32> {
        let mut tokens = Vec::new();
        for &h in hash_ids {
            let corpus = self.corpus;
            let size = corpus.len() as i64;
            let block = self.cache.entry(h).or_insert_with(|| {
                let seed = sha256_u64(&format!("{}:{}:{h}", self.base_seed, self.trace_id));
                let start = PyRandom::seed(seed).choice_index(corpus.len()).unwrap_or(0) as i64;
                let end = start + self.block_size;
                let mut block = slice(corpus, start, end).to_vec();
                if end > size {
                    block.extend_from_slice(slice(corpus, 0, end - size));
                }
                block
            });
            tokens.extend_from_slice(block);
        }
        tokens
    }

    /// `sample_partial_tail_tokens`: `n` tokens from `sha256(seed) % max(len − n, 1)`.
    fn tail(&self, n: i64, seed: &str) -> Vec<u32> {
        if n <= 0 {
            return Vec::new();
        }
        let modulus = (self.corpus.len() as i64 - n).max(1) as u64;
        let offset = (sha256_u64(seed) % modulus) as i64;
        slice(self.corpus, offset, offset + n).to_vec()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// `RoleSegment`: its text is kept decoded, as upstream re-decodes a segment only when it changes.
#[derive(Debug, Clone)]
struct Segment {
    role: Role,
    block_count: i64,
    tokens: Vec<u32>,
    content: String,
}

/// One stream of turns to reconstruct: the parent's, or one of a sub-agent's.
struct Conversation<'a> {
    /// (start in seconds after warping, request).
    turns: &'a [(f64, &'a WekaTurn)],
    tool_tokens: i64,
    system_tokens: i64,
    /// `{seed_prefix}:turn_{k}:partial_tail` seeds each turn's tail.
    seed_prefix: &'a str,
    final_seed: String,
    call_id: &'a dyn Fn(usize) -> String,
}

type Decode<'d> = dyn FnMut(&[u32]) -> Result<String, WekaError> + 'd;

fn segment(
    role: Role,
    block_count: i64,
    tokens: Vec<u32>,
    decode: &mut Decode<'_>,
) -> Result<Segment, WekaError> {
    let content = decode(&tokens)?;
    Ok(Segment {
        role,
        block_count,
        tokens,
        content,
    })
}

/// Python's `math.ceil(a / b)` for the positive `b` here.
fn ceil_div(a: i64, b: i64) -> i64 {
    (a as f64 / b as f64).ceil() as i64
}

/// `ConversationReconstructor` over one stream, each turn's call pushed onto `calls`.
fn reconstruct(
    calls: &mut Vec<WekaCall>,
    blocks: &mut Blocks<'_>,
    decode: &mut Decode<'_>,
    conversation: &Conversation<'_>,
) -> Result<(), WekaError> {
    let bs = blocks.block_size;
    let mut segments: Vec<Segment> = Vec::new();
    let mut snapshots: Vec<Vec<Segment>> = Vec::with_capacity(conversation.turns.len());
    for (k, (_, turn)) in conversation.turns.iter().enumerate() {
        let seed = format!("{}:turn_{k}:partial_tail", conversation.seed_prefix);
        if k == 0 {
            segments = first_turn(blocks, decode, turn, conversation, &seed)?;
        } else {
            let prev = conversation.turns[k - 1].1;
            advance(&mut segments, blocks, decode, prev, turn, &seed, bs)?;
        }
        snapshots.push(segments.clone());
    }
    for (k, (start, turn)) in conversation.turns.iter().enumerate() {
        // The lookahead upstream runs is the next turn's own reconstruction: its last assistant segment.
        let output = match snapshots.get(k + 1) {
            Some(next) => next
                .iter()
                .rev()
                .find(|s| s.role == Role::Assistant)
                .map(|s| s.content.clone())
                .unwrap_or_default(),
            None => decode(&blocks.tail(turn.output_length, &conversation.final_seed))?,
        };
        let t_start_ms = (start * 1000.0) as i64;
        calls.push(WekaCall {
            id: (conversation.call_id)(k),
            t_start_ms,
            t_end_ms: t_start_ms + (turn.api_time.unwrap_or(0.0) * 1000.0) as i64,
            messages: snapshots[k]
                .iter()
                .map(|s| ChatMessage {
                    role: s.role.name().to_owned(),
                    content: s.content.clone(),
                })
                .collect(),
            output,
            prompt_tokens: turn.input_length,
            completion_tokens: turn.output_length,
        });
    }
    Ok(())
}

/// `init_turn_0`: a system segment of the tool and system tokens' blocks, then the user's.
fn first_turn(
    blocks: &mut Blocks<'_>,
    decode: &mut Decode<'_>,
    turn: &WekaTurn,
    conversation: &Conversation<'_>,
    seed: &str,
) -> Result<Vec<Segment>, WekaError> {
    let bs = blocks.block_size;
    let hash_ids = &turn.hash_ids;
    let m_full = turn.input_length.div_euclid(bs);
    let partial_tail = turn.input_length - m_full * bs;
    let covered = m_full.min(hash_ids.len() as i64);
    let missing_tokens = (m_full - covered) * bs;
    let mut cursor = 0i64;
    let mut segments = Vec::new();
    if conversation.tool_tokens > 0 || conversation.system_tokens > 0 {
        let prefix_blocks = ceil_div(conversation.tool_tokens + conversation.system_tokens, bs)
            .min(hash_ids.len() as i64);
        if prefix_blocks > 0 {
            let tokens = blocks.tokens(&hash_ids[..prefix_blocks as usize]);
            segments.push(segment(Role::System, prefix_blocks, tokens, decode)?);
            cursor = prefix_blocks;
        }
    }
    let user_blocks = covered - cursor;
    let ids = if covered > cursor {
        &hash_ids[cursor as usize..covered as usize]
    } else {
        &[][..]
    };
    let mut tokens = blocks.tokens(ids);
    tokens.extend(blocks.tail(missing_tokens + partial_tail, seed));
    segments.push(segment(Role::User, user_blocks, tokens, decode)?);
    Ok(segments)
}

/// `advance_turn`: history cut at the longest common prefix, then the assistant's blocks and the user's.
fn advance(
    segments: &mut Vec<Segment>,
    blocks: &mut Blocks<'_>,
    decode: &mut Decode<'_>,
    prev: &WekaTurn,
    curr: &WekaTurn,
    seed: &str,
    bs: i64,
) -> Result<(), WekaError> {
    let m_curr = curr.hash_ids.len() as i64;
    let m_curr_full = curr.input_length.div_euclid(bs);
    let missing_tokens = ((m_curr_full - m_curr) * bs).max(0);
    let lcp = prev
        .hash_ids
        .iter()
        .zip(&curr.hash_ids)
        .take_while(|(a, b)| a == b)
        .count() as i64;
    truncate_at_block(segments, lcp, bs, prev.input_length.rem_euclid(bs), decode)?;
    let mut region = blocks.tokens(&curr.hash_ids[lcp as usize..]);
    region.extend(blocks.tail(missing_tokens + curr.input_length.rem_euclid(bs), seed));
    let new_blocks = m_curr - lcp;
    let answer_target = if prev.output_length > 0 {
        ceil_div(prev.output_length, bs)
    } else {
        0
    };
    let answer_blocks = answer_target.min(new_blocks);
    let answer_len = (answer_blocks * bs).clamp(0, region.len() as i64) as usize;
    if answer_blocks > 0 {
        segments.push(segment(
            Role::Assistant,
            answer_blocks,
            region[..answer_len].to_vec(),
            decode,
        )?);
    }
    let user = &region[answer_len..];
    if !user.is_empty() {
        segments.push(segment(
            Role::User,
            new_blocks - answer_blocks,
            user.to_vec(),
            decode,
        )?);
    }
    Ok(())
}

/// `truncate_synth_buf_at_block`: keep the first `target` blocks; a cut exactly at a segment's end drops the
/// previous turn's partial tail tokens from it.
fn truncate_at_block(
    segments: &mut Vec<Segment>,
    target: i64,
    bs: i64,
    prev_partial_tail: i64,
    decode: &mut Decode<'_>,
) -> Result<(), WekaError> {
    if target <= 0 {
        segments.clear();
        return Ok(());
    }
    let mut cursor = 0i64;
    for i in 0..segments.len() {
        let seg = &mut segments[i];
        if cursor + seg.block_count < target {
            cursor += seg.block_count;
            continue;
        }
        if cursor + seg.block_count == target {
            if prev_partial_tail > 0 && !seg.tokens.is_empty() {
                let keep = seg.tokens.len() - (prev_partial_tail as usize).min(seg.tokens.len());
                seg.tokens.truncate(keep);
                seg.content = decode(&seg.tokens)?;
            }
            segments.truncate(i + 1);
            return Ok(());
        }
        if cursor == target {
            segments.truncate(i);
            return Ok(());
        }
        let kept_blocks = target - cursor;
        let kept = (kept_blocks * bs).clamp(0, seg.tokens.len() as i64) as usize;
        seg.block_count = kept_blocks;
        seg.tokens.truncate(kept);
        seg.content = decode(&seg.tokens)?;
        segments.truncate(i + 1);
        return Ok(());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
