//! Synthetic prompts of exact token lengths.
//!
//! Prompts are drawn as token ids: random "plain word" tokens of the vocabulary (tokens that each decode to one
//! space-separated word and re-encode to themselves alone and in pairs), or a window of a corpus.
//!
//! Plain words make exactness cheap. When a synthesizer is built it certifies that the tokenizer encodes a
//! long random sequence of its plain words back to exactly those ids, and that the sequence's text is the
//! concatenation of the words' texts (true of byte-level and SentencePiece BPE, WordPiece and word-level
//! tokenizers, whose pre-tokenizers split at spaces). A certified synthesizer builds text by concatenation with
//! no tokenizer call, and re-encodes one prompt in [`SPOT_CHECK_EVERY`] as a tripwire: a mismatch throws the whole
//! batch away and rebuilds it in the careful mode.
//!
//! The careful mode (uncertified tokenizers, corpus text) decodes the ids, re-encodes the text and repairs the
//! tail from the re-encoded ids (cut to length, or topped up with plain words) until the count is exact. Only the
//! end of a prompt moves, so a shared prefix stays byte-identical and token-identical.
//!
//! The upstream tools do less: inference-perf and vLLM decode random ids and only warn on a mismatch, guidellm
//! truncates without re-verifying. Exact lengths make the tools' numbers comparable on any tokenizer.

use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom as _;
use rand::{Rng, RngExt as _, SeedableRng as _};
use rand_distr::Distribution as _;
use rand_distr::weighted::WeightedIndex;

use super::{DataError, LengthDistribution, LengthSampler, Prompt, Prompts};
use llmbench_text::tokenizer::Tokenizer;

/// How many encode-and-repair rounds a prompt gets before synthesis gives up.
const MAX_ROUNDS: usize = 16;
/// Items reserved up front for a list whose length comes from a profile; more grow the list as they are built.
const PREALLOCATED: usize = 65_536;
/// A certified synthesizer re-encodes the first prompt and then one in this many.
pub const SPOT_CHECK_EVERY: usize = 256;
/// Tokens of plain words encoded to certify a tokenizer (each word is seen several times, next to others).
const CERTIFY_TOKENS: usize = 20_000;

/// Builds prompt text of exact token lengths under one tokenizer.
#[derive(Debug, Clone)]
pub struct Synthesizer<'t> {
    tokenizer: &'t Tokenizer,
    /// Plain word tokens: the random vocabulary, and the filler of repairs.
    words: Vec<Word>,
    /// Whether sequences of plain words encode and decode word by word (see the module docs).
    certified: bool,
    /// A corpus's token ids, when prompts are cut from a text rather than drawn at random.
    corpus: Option<Vec<u32>>,
}

/// A plain word token and its text at the start of a prompt and after another word.
#[derive(Debug, Clone)]
struct Word {
    id: u32,
    first: Box<str>,
    next: Box<str>,
}

/// Text and the ids it encodes to, exactly.
#[derive(Debug, Clone, PartialEq)]
struct Segment {
    text: String,
    ids: Vec<u32>,
}

/// Why a batch in the fast mode must be rebuilt, or could not be built at all.
enum Failure {
    SpotCheck,
    Data(DataError),
}

impl From<DataError> for Failure {
    fn from(e: DataError) -> Self {
        Failure::Data(e)
    }
}

impl From<llmbench_text::tokenizer::TokenizerError> for Failure {
    fn from(e: llmbench_text::tokenizer::TokenizerError) -> Self {
        Failure::Data(e.into())
    }
}

impl<'t> Synthesizer<'t> {
    /// Random prompts from the tokenizer's plain word tokens (inference-perf and vLLM `random`).
    pub fn new(tokenizer: &'t Tokenizer) -> Result<Self, DataError> {
        let mut words = Vec::new();
        for id in tokenizer.plain_words() {
            let first = tokenizer.decode(&[id])?;
            let pair = tokenizer.decode(&[id, id])?;
            if let Some(next) = pair.strip_prefix(first.as_str()).filter(|n| !n.is_empty()) {
                words.push(Word {
                    id,
                    next: next.into(),
                    first: first.into(),
                });
            }
        }
        if words.is_empty() {
            return Err(DataError::NoVocabulary {
                tokenizer: tokenizer.name().to_owned(),
            });
        }
        let mut synth = Synthesizer {
            tokenizer,
            words,
            certified: false,
            corpus: None,
        };
        synth.certified = synth.certify()?;
        if !synth.certified {
            tracing::info!(
                tokenizer = tokenizer.name(),
                "plain words do not encode word by word under this tokenizer: every prompt will be re-encoded"
            );
        }
        Ok(synth)
    }

    /// Prompts cut from `corpus` at random places (vLLM `sonnet`, inference-perf `synthetic`); `name` says which
    /// corpus in errors.
    pub fn with_corpus(
        tokenizer: &'t Tokenizer,
        name: &str,
        corpus: &str,
    ) -> Result<Self, DataError> {
        let mut synth = Self::new(tokenizer)?;
        // One line at a time keeps each encode small; a newline between lines keeps their words apart.
        let mut ids = Vec::new();
        for line in corpus.lines().map(str::trim).filter(|l| !l.is_empty()) {
            ids.extend(tokenizer.encode(&format!("{line}\n"))?);
        }
        if ids.is_empty() {
            return Err(DataError::EmptyCorpus {
                name: name.to_owned(),
            });
        }
        synth.corpus = Some(ids);
        Ok(synth)
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        self.tokenizer
    }

    /// The plain words as owned text (at the start of a text, after another word), when the tokenizer is
    /// certified: then `n` of them concatenated are exactly `n` tokens, with no tokenizer call — which lets a run
    /// build long texts as it goes (inference-perf `conversation_replay`) instead of all before it starts.
    pub fn certified_words(&self) -> Option<Vec<(Box<str>, Box<str>)>> {
        self.certified.then(|| {
            self.words
                .iter()
                .map(|w| (w.first.clone(), w.next.clone()))
                .collect()
        })
    }

    /// Whether a long random sequence of plain words encodes to its ids and decodes to its words' texts.
    fn certify(&self) -> Result<bool, DataError> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5eed);
        let n = CERTIFY_TOKENS.min(self.words.len() * 64).max(256);
        let sample = self.plain_text(None, n, &mut rng);
        let decoded = self.tokenizer.decode(&sample.ids)?;
        Ok(decoded == sample.text && self.tokenizer.encode(&sample.text)? == sample.ids)
    }

    fn random_word<R: Rng + ?Sized>(&self, rng: &mut R) -> &Word {
        &self.words[rng.random_range(0..self.words.len())]
    }

    /// `head` followed by `n` random plain words, text by concatenation (exact when certified).
    fn plain_text<R: Rng + ?Sized>(
        &self,
        head: Option<&Segment>,
        n: usize,
        rng: &mut R,
    ) -> Segment {
        // The reservation is bounded; a longer prompt grows its buffers as it is built.
        let reserve = n.min(PREALLOCATED);
        let (mut text, mut ids) = match head {
            Some(h) => {
                let mut text = String::with_capacity(h.text.len() + reserve * 8);
                text.push_str(&h.text);
                let mut ids = Vec::with_capacity(h.ids.len() + reserve);
                ids.extend_from_slice(&h.ids);
                (text, ids)
            }
            None => (
                String::with_capacity(reserve * 8),
                Vec::with_capacity(reserve),
            ),
        };
        for _ in 0..n {
            let word = self.random_word(rng);
            text.push_str(if ids.is_empty() {
                &word.first
            } else {
                &word.next
            });
            ids.push(word.id);
        }
        Segment { text, ids }
    }

    /// `n` token ids to start a prompt body from.
    fn draw<R: Rng + ?Sized>(&self, n: usize, rng: &mut R) -> Vec<u32> {
        match &self.corpus {
            Some(corpus) => {
                let start = rng.random_range(0..corpus.len());
                corpus.iter().cycle().skip(start).take(n).copied().collect()
            }
            None => (0..n).map(|_| self.random_word(rng).id).collect(),
        }
    }

    /// Text of exactly `head.len() + body.len()` tokens: `head` (kept as it is, text and ids) followed by text
    /// made from `body`, re-encoded and repaired at the end until its length is exact.
    fn compose<R: Rng + ?Sized>(
        &self,
        head: Option<&Segment>,
        mut body: Vec<u32>,
        rng: &mut R,
    ) -> Result<Segment, DataError> {
        let head_len = head.map_or(0, |h| h.ids.len());
        let target = head_len + body.len();
        let mut closest = 0usize;
        let mut ids = Vec::with_capacity(target.min(PREALLOCATED) + 8);
        for round in 0..MAX_ROUNDS {
            ids.clear();
            if let Some(h) = head {
                ids.extend_from_slice(&h.ids);
            }
            ids.extend_from_slice(&body);
            let text = self.tokenizer.decode(&ids)?;
            let encoded = self.tokenizer.encode(&text)?;
            if let Some(h) = head {
                // The body's first token merged into the prefix (or changed how it decodes): try another.
                let intact =
                    text.starts_with(&h.text) && encoded.get(..head_len) == Some(h.ids.as_slice());
                if !intact {
                    match body.first_mut() {
                        Some(first) => *first = self.random_word(rng).id,
                        None => break,
                    }
                    continue;
                }
            }
            if encoded.len().abs_diff(target) < closest.abs_diff(target) {
                closest = encoded.len();
            }
            if encoded.len() == target {
                return Ok(Segment { text, ids: encoded });
            }
            // Keep the re-encoded ids up to the target, top up with plain words. A tail that keeps re-expanding
            // (a lone byte piece decodes to U+FFFD, which is three tokens) is given up half at a time for plain
            // words, which always converge.
            let mut keep = encoded.len().min(target) - head_len;
            if round >= 2 {
                keep = keep.min((target - head_len) >> (round - 1));
            }
            body.clear();
            body.extend_from_slice(&encoded[head_len..head_len + keep]);
            body.extend((head_len + keep..target).map(|_| self.random_word(rng).id));
        }
        Err(DataError::InexactLength {
            target,
            got: closest,
            tokenizer: self.tokenizer.name().to_owned(),
        })
    }
}

/// One batch's synthesis: the fast mode (certified plain words, spot-checked) or the careful one.
struct Batch<'s, 't> {
    synth: &'s Synthesizer<'t>,
    rng: Xoshiro256PlusPlus,
    fast: bool,
    built: usize,
}

impl<'s, 't> Batch<'s, 't> {
    fn new(synth: &'s Synthesizer<'t>, seed: u64, careful: bool) -> Self {
        Batch {
            synth,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            fast: !careful && synth.certified && synth.corpus.is_none(),
            built: 0,
        }
    }

    /// `head` followed by `body_len` new tokens, exactly.
    fn segment(&mut self, head: Option<&Segment>, body_len: usize) -> Result<Segment, Failure> {
        if !self.fast {
            let body = self.synth.draw(body_len, &mut self.rng);
            return Ok(self.synth.compose(head, body, &mut self.rng)?);
        }
        let segment = self.synth.plain_text(head, body_len, &mut self.rng);
        let check = self.built.is_multiple_of(SPOT_CHECK_EVERY);
        self.built += 1;
        if check && self.synth.tokenizer.encode(&segment.text)? != segment.ids {
            tracing::warn!(
                tokenizer = self.synth.tokenizer.name(),
                "a spot check found a prompt whose length is off: rebuilding every prompt with re-encoding"
            );
            return Err(Failure::SpotCheck);
        }
        Ok(segment)
    }
}

/// Runs `build` in the fast mode, and again carefully if a spot check fails.
fn with_fallback(
    synth: &Synthesizer<'_>,
    seed: u64,
    build: impl Fn(&mut Batch<'_, '_>) -> Result<Prompts, Failure>,
) -> Result<Prompts, DataError> {
    match build(&mut Batch::new(synth, seed, false)) {
        Ok(prompts) => Ok(prompts),
        Err(Failure::Data(e)) => Err(e),
        Err(Failure::SpotCheck) => match build(&mut Batch::new(synth, seed, true)) {
            Ok(prompts) => Ok(prompts),
            Err(Failure::Data(e)) => Err(e),
            Err(Failure::SpotCheck) => unreachable!("the careful mode makes no spot checks"),
        },
    }
}

/// One prefix bucket of guidellm's `synthetic_text`: `prefix_count` distinct prefixes of `prefix_tokens` tokens,
/// chosen with relative `weight`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixBucket {
    pub prefix_tokens: u32,
    pub prefix_count: u32,
    pub weight: f64,
}

/// Independent prompts: inference-perf `random`/`mock`, guidellm `synthetic_text`, vLLM `random` and `sonnet`.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    pub num_prompts: usize,
    /// Tokens after the prefix (the whole prompt when there is no prefix).
    pub prompt_tokens: LengthDistribution,
    /// `max_tokens`; None sends none.
    pub output_tokens: Option<LengthDistribution>,
    /// Prefixes put before the prompt tokens; empty for none. A prompt's length is its prefix plus its draw.
    pub prefix_buckets: Vec<PrefixBucket>,
    /// How many tokens of each length (a prefix's, a draw's) are special tokens the tokenizer adds rather than
    /// text: the tool being imitated counts them in (see the `prompts` module), so each text is that many tokens
    /// shorter. 0: every length is the text's own tokens.
    pub specials_in_each_length: u32,
    pub seed: u64,
}

/// inference-perf `shared_prefix`: `num_groups` system prompts, each followed by `prompts_per_group` questions.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedPrefixSpec {
    pub num_groups: u32,
    pub prompts_per_group: u32,
    /// Each group's system prompt length is one draw (inference-perf samples `num_groups` lengths).
    pub system_prompt_len: LengthDistribution,
    pub question_len: LengthDistribution,
    pub output_len: Option<LengthDistribution>,
    /// Interleave the groups in a seeded random order, as inference-perf does; false keeps them group by group.
    pub shuffle: bool,
    /// As [`SyntheticSpec::specials_in_each_length`], for the system prompt's and each question's length.
    pub specials_in_each_length: u32,
    pub seed: u64,
    /// inference-perf's `shared_prefix.multimodal.image`: images drawn once per group and woven into its system
    /// prompt, the same bytes in each of the group's prompts.
    pub prefix_images: Option<crate::image::WovenImages>,
    /// inference-perf's `data.multimodal.image`: images drawn for each prompt and woven into its question.
    pub question_images: Option<crate::image::WovenImages>,
}

/// Salt of the shared-prefix images' stream, so a prompt's text is the same with or without images.
const WOVEN_IMAGE_SALT: u64 = 0x1a6e_5eed_0f1a_6e55;

/// The prompts `spec` describes; the same seed gives the same prompts.
pub fn synthetic_prompts(
    synth: &Synthesizer<'_>,
    spec: &SyntheticSpec,
) -> Result<Prompts, DataError> {
    let prompt_lengths = spec.prompt_tokens.sampler("prompt length")?;
    let output_lengths = spec
        .output_tokens
        .as_ref()
        .map(|d| d.sampler("output length"))
        .transpose()?;
    for (i, bucket) in spec.prefix_buckets.iter().enumerate() {
        if bucket.prefix_count == 0 {
            return Err(DataError::InvalidDistribution {
                what: format!("prefix bucket {i}"),
                reason: "prefix_count must be at least 1".to_owned(),
            });
        }
    }
    let bucket_choice = if spec.prefix_buckets.is_empty() {
        None
    } else {
        Some(
            WeightedIndex::new(spec.prefix_buckets.iter().map(|b| b.weight)).map_err(|e| {
                DataError::InvalidDistribution {
                    what: "prefix bucket weights".to_owned(),
                    reason: e.to_string(),
                }
            })?,
        )
    };
    with_fallback(synth, spec.seed, |batch| {
        // Every bucket's prefixes, numbered across buckets so a prompt can say which it shares.
        let mut prefixes: Vec<Vec<(u32, Option<Segment>)>> =
            Vec::with_capacity(spec.prefix_buckets.len());
        let mut next_group = 0u32;
        for bucket in &spec.prefix_buckets {
            let mut bucket_prefixes =
                Vec::with_capacity((bucket.prefix_count as usize).min(PREALLOCATED));
            for _ in 0..bucket.prefix_count {
                let segment = match own_tokens(bucket.prefix_tokens, spec.specials_in_each_length) {
                    0 => None,
                    n => Some(batch.segment(None, n)?),
                };
                bucket_prefixes.push((next_group, segment));
                next_group = next_group.saturating_add(1);
            }
            prefixes.push(bucket_prefixes);
        }
        let mut prompts = Vec::with_capacity(spec.num_prompts.min(PREALLOCATED));
        for _ in 0..spec.num_prompts {
            let drawn = own_tokens(
                prompt_lengths.sample(&mut batch.rng),
                spec.specials_in_each_length,
            );
            let max_tokens = output_lengths
                .as_ref()
                .map(|s| s.sample(&mut batch.rng).max(1));
            let (group, head) = match &bucket_choice {
                Some(choice) => {
                    let bucket = &prefixes[choice.sample(&mut batch.rng)];
                    let (group, head) = &bucket[batch.rng.random_range(0..bucket.len())];
                    (head.as_ref().map(|_| *group), head.as_ref())
                }
                None => (None, None),
            };
            // A prompt is never empty: with no prefix, at least one token.
            let body_len = if head.is_some() { drawn } else { drawn.max(1) };
            let segment = batch.segment(head, body_len)?;
            let mut prompt = Prompt::text(segment.text, token_count(segment.ids.len()), max_tokens);
            prompt.prefix_group = group;
            prompts.push(prompt);
        }
        Ok(Prompts::new(prompts, 0))
    })
}

/// The shared-prefix prompts `spec` describes; the same seed gives the same prompts.
pub fn shared_prefix_prompts(
    synth: &Synthesizer<'_>,
    spec: &SharedPrefixSpec,
) -> Result<Prompts, DataError> {
    let system_lengths = spec.system_prompt_len.sampler("system_prompt_len")?;
    let question_lengths = spec.question_len.sampler("question_len")?;
    let output_lengths = spec
        .output_len
        .as_ref()
        .map(|d| d.sampler("output_len"))
        .transpose()?;
    let prefix_images = woven_counts(&spec.prefix_images, "shared_prefix.multimodal.image.count")?;
    let question_images = woven_counts(&spec.question_images, "multimodal.image.count")?;
    with_fallback(synth, spec.seed, |batch| {
        let total = (spec.num_groups as usize).saturating_mul(spec.prompts_per_group as usize);
        // Reserve a bounded amount: the vector grows as prompts are built, never in one allocation sized from
        // the profile.
        let mut prompts = Vec::with_capacity(total.min(PREALLOCATED));
        let mut image_rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed ^ WOVEN_IMAGE_SALT);
        for group in 0..spec.num_groups {
            let system = match own_tokens(
                system_lengths.sample(&mut batch.rng),
                spec.specials_in_each_length,
            ) {
                0 => None,
                n => Some(batch.segment(None, n)?),
            };
            let prefix_chars = system.as_ref().map(|s| s.text.chars().count());
            let place = |in_prefix: bool, drawn: Vec<crate::image::WovenImage>| {
                drawn
                    .into_iter()
                    .map(|d| crate::image::ImageInput {
                        place: Some(crate::image::ImagePlace {
                            point: d.point,
                            in_prefix,
                            prefix_chars,
                        }),
                        ..crate::image::solid_png_image(d.width, d.height, d.rgb)
                    })
                    .collect::<Vec<_>>()
            };
            // `_generate_prompts` samples the group's prefix spec once, before its questions.
            let group_images = match &prefix_images {
                Some((images, count)) => place(true, images.draw(count, &mut image_rng)),
                None => Vec::new(),
            };
            for _ in 0..spec.prompts_per_group {
                let drawn = own_tokens(
                    question_lengths.sample(&mut batch.rng),
                    spec.specials_in_each_length,
                );
                let max_tokens = output_lengths
                    .as_ref()
                    .map(|s| s.sample(&mut batch.rng).max(1));
                let body_len = if system.is_some() {
                    drawn
                } else {
                    drawn.max(1)
                };
                let segment = batch.segment(system.as_ref(), body_len)?;
                let mut prompt =
                    Prompt::text(segment.text, token_count(segment.ids.len()), max_tokens);
                prompt.prefix_group = Some(group);
                prompt.images = group_images.clone();
                if let Some((images, count)) = &question_images {
                    prompt
                        .images
                        .extend(place(false, images.draw(count, &mut image_rng)));
                }
                prompts.push(prompt);
            }
        }
        if spec.shuffle {
            prompts.shuffle(&mut batch.rng);
        }
        Ok(Prompts::new(prompts, 0))
    })
}

/// An image spec with the sampler of its count.
fn woven_counts<'s>(
    images: &'s Option<crate::image::WovenImages>,
    what: &str,
) -> Result<Option<(&'s crate::image::WovenImages, LengthSampler)>, DataError> {
    images
        .as_ref()
        .map(|i| i.count.sampler(what).map(|c| (i, c)))
        .transpose()
}

/// The text's own tokens of a `length` that counts `specials` special tokens.
fn own_tokens(length: u32, specials: u32) -> usize {
    length.saturating_sub(specials) as usize
}

fn token_count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use llmbench_text::tokenizer::testing::{Style, bpe};

    fn tokenizers() -> Vec<Tokenizer> {
        vec![
            Tokenizer::builtin(),
            bpe(Style::ByteLevel),
            bpe(Style::Metaspace),
        ]
    }

    fn spec(prompt_tokens: LengthDistribution, n: usize) -> SyntheticSpec {
        SyntheticSpec {
            num_prompts: n,
            prompt_tokens,
            output_tokens: Some(LengthDistribution::Fixed(17)),
            prefix_buckets: Vec::new(),
            specials_in_each_length: 0,
            seed: 42,
        }
    }

    #[test]
    fn every_synthetic_prompt_re_encodes_to_exactly_its_length() {
        for tokenizer in tokenizers() {
            let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
            let prompts = synthetic_prompts(
                &synth,
                &spec(LengthDistribution::Uniform { min: 1, max: 300 }, 200),
            )
            .expect("prompts")
            .into_inner();
            assert_eq!(prompts.len(), 200);
            for p in &prompts {
                assert_eq!(
                    tokenizer.count(&p.text).expect("count"),
                    p.input_tokens,
                    "{}: {:?}",
                    tokenizer.name(),
                    p.text
                );
                assert!((1..=300).contains(&p.input_tokens));
                assert_eq!(p.max_tokens, Some(17));
            }
        }
    }

    #[test]
    fn fixed_lengths_are_exact_for_every_prompt() {
        for tokenizer in tokenizers() {
            let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
            let prompts = synthetic_prompts(&synth, &spec(LengthDistribution::Fixed(128), 50))
                .expect("prompts");
            let stats = prompts.stats();
            assert_eq!(
                (stats.input_tokens_min, stats.input_tokens_max),
                (128, 128),
                "{}",
                tokenizer.name()
            );
            for p in prompts.as_slice() {
                assert_eq!(tokenizer.encode(&p.text).expect("encode").len(), 128);
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_prompts() {
        let tokenizer = bpe(Style::ByteLevel);
        let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
        let dist = LengthDistribution::Normal {
            mean: 50.0,
            std_dev: 10.0,
            min: 10,
            max: 90,
        };
        let a = synthetic_prompts(&synth, &spec(dist.clone(), 30)).expect("a");
        let b = synthetic_prompts(&synth, &spec(dist.clone(), 30)).expect("b");
        assert_eq!(a, b);
        let c = synthetic_prompts(
            &synth,
            &SyntheticSpec {
                seed: 43,
                ..spec(dist, 30)
            },
        )
        .expect("c");
        assert_ne!(a, c);
    }

    #[test]
    fn shared_prefix_groups_start_with_the_same_tokens() {
        for tokenizer in tokenizers() {
            let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
            let prompts = shared_prefix_prompts(
                &synth,
                &SharedPrefixSpec {
                    num_groups: 4,
                    prompts_per_group: 5,
                    system_prompt_len: LengthDistribution::Fixed(100),
                    question_len: LengthDistribution::Uniform { min: 5, max: 40 },
                    output_len: Some(LengthDistribution::Fixed(9)),
                    shuffle: true,
                    specials_in_each_length: 0,
                    seed: 3,
                    prefix_images: None,
                    question_images: None,
                },
            )
            .expect("prompts")
            .into_inner();
            assert_eq!(prompts.len(), 20);
            let mut prefixes: HashMap<u32, Vec<u32>> = HashMap::new();
            for p in &prompts {
                let ids = tokenizer.encode(&p.text).expect("encode");
                assert_eq!(ids.len() as u32, p.input_tokens, "{}", tokenizer.name());
                assert!((105..=140).contains(&p.input_tokens));
                let group = p.prefix_group.expect("a group");
                let prefix = prefixes.entry(group).or_insert_with(|| ids[..100].to_vec());
                assert_eq!(
                    &ids[..100],
                    prefix.as_slice(),
                    "{}: group {group}",
                    tokenizer.name()
                );
            }
            assert_eq!(prefixes.len(), 4);
            let distinct: std::collections::HashSet<&Vec<u32>> = prefixes.values().collect();
            assert_eq!(distinct.len(), 4, "groups have different prefixes");
            let in_order: Vec<u32> = prompts.iter().filter_map(|p| p.prefix_group).collect();
            assert!(
                in_order.windows(2).any(|w| w[0] > w[1]),
                "shuffled across groups"
            );
        }
    }

    #[test]
    fn prefix_buckets_give_count_distinct_prefixes_chosen_by_weight() {
        let tokenizer = bpe(Style::ByteLevel);
        let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
        let spec = SyntheticSpec {
            prefix_buckets: vec![
                PrefixBucket {
                    prefix_tokens: 32,
                    prefix_count: 2,
                    weight: 3.0,
                },
                PrefixBucket {
                    prefix_tokens: 64,
                    prefix_count: 3,
                    weight: 1.0,
                },
            ],
            ..spec(LengthDistribution::Fixed(20), 400)
        };
        let prompts = synthetic_prompts(&synth, &spec)
            .expect("prompts")
            .into_inner();
        let mut by_group: HashMap<u32, Vec<&Prompt>> = HashMap::new();
        for p in &prompts {
            by_group
                .entry(p.prefix_group.expect("a prefix"))
                .or_default()
                .push(p);
        }
        assert_eq!(by_group.len(), 5, "2 + 3 distinct prefixes");
        let short: usize = prompts.iter().filter(|p| p.input_tokens == 52).count();
        let long: usize = prompts.iter().filter(|p| p.input_tokens == 84).count();
        assert_eq!(short + long, 400, "prefix plus 20 prompt tokens");
        assert!(
            (250..350).contains(&short),
            "weight 3:1, got {short} short of 400"
        );
        for (group, members) in by_group {
            let prefix_len = if members[0].input_tokens == 52 {
                32
            } else {
                64
            };
            let first = tokenizer.encode(&members[0].text).expect("encode");
            for p in members {
                assert_eq!(
                    tokenizer.encode(&p.text).expect("encode")[..prefix_len],
                    first[..prefix_len],
                    "{group}"
                );
            }
        }
    }

    #[test]
    fn corpus_prompts_are_cut_from_the_corpus_and_exact() {
        let corpus = "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n\
                      Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;\n";
        for tokenizer in tokenizers() {
            let synth =
                Synthesizer::with_corpus(&tokenizer, "sonnet.txt", corpus).expect("synthesizer");
            let prompts = synthetic_prompts(
                &synth,
                &spec(LengthDistribution::Uniform { min: 5, max: 120 }, 60),
            )
            .expect("prompts")
            .into_inner();
            for p in &prompts {
                assert_eq!(
                    tokenizer.count(&p.text).expect("count"),
                    p.input_tokens,
                    "{}: {:?}",
                    tokenizer.name(),
                    p.text
                );
            }
            assert!(
                prompts.iter().any(|p| p.text.contains("summer")),
                "{}",
                tokenizer.name()
            );
        }
        let err =
            Synthesizer::with_corpus(&Tokenizer::builtin(), "empty.txt", " \n\n").unwrap_err();
        assert!(err.to_string().contains("empty.txt"), "{err}");
    }

    #[test]
    fn bad_bucket_weights_are_rejected() {
        let tokenizer = Tokenizer::builtin();
        let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
        let spec = SyntheticSpec {
            prefix_buckets: vec![PrefixBucket {
                prefix_tokens: 4,
                prefix_count: 1,
                weight: 0.0,
            }],
            ..spec(LengthDistribution::Fixed(3), 3)
        };
        assert!(matches!(
            synthetic_prompts(&synth, &spec),
            Err(DataError::InvalidDistribution { .. })
        ));
    }

    #[test]
    fn real_tokenizers_are_certified_for_the_fast_path() {
        for tokenizer in tokenizers() {
            assert!(
                Synthesizer::new(&tokenizer).expect("synthesizer").certified,
                "{}",
                tokenizer.name()
            );
        }
    }

    #[test]
    fn the_careful_mode_repairs_arbitrary_token_ids_to_exact_lengths() {
        // Random ids of the whole vocabulary (byte pieces, word continuations, punctuation) rarely survive a
        // decode and re-encode unchanged: the repair must still land on the exact length, after a prefix.
        for style in [Style::ByteLevel, Style::Metaspace] {
            let tokenizer = bpe(style);
            let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
            let vocab = tokenizer.vocab_size() as u32;
            let head = synth
                .compose(
                    None,
                    (0..50).map(|_| rng.random_range(2..vocab)).collect(),
                    &mut rng,
                )
                .expect("head");
            assert_eq!(tokenizer.encode(&head.text).expect("encode").len(), 50);
            for n in [1usize, 7, 64, 300] {
                let body: Vec<u32> = (0..n).map(|_| rng.random_range(2..vocab)).collect();
                let segment = synth.compose(Some(&head), body, &mut rng).expect("segment");
                let ids = tokenizer.encode(&segment.text).expect("encode");
                assert_eq!(ids.len(), 50 + n, "{style:?}");
                assert_eq!(ids[..50], head.ids[..], "{style:?}: the prefix is kept");
                assert!(segment.text.starts_with(&head.text));
            }
        }
    }

    #[test]
    fn fast_and_careful_modes_give_the_same_lengths() {
        let tokenizer = bpe(Style::Metaspace);
        let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
        let spec = spec(LengthDistribution::Uniform { min: 1, max: 50 }, 40);
        let build = |careful: bool| {
            let mut batch = Batch::new(&synth, spec.seed, careful);
            (0..20)
                .map(|i| {
                    let segment = batch
                        .segment(None, i + 1)
                        .map_err(|_| "failed")
                        .expect("segment");
                    tokenizer.encode(&segment.text).expect("encode").len()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(build(false), build(true));
        assert_eq!(build(false), (1..=20).collect::<Vec<_>>());
    }

    /// Not a speed gate (speed is kept out of unit tests): prints the synthesis rate.
    /// `cargo test -p llmbench --release --lib synthesis_rate -- --ignored --nocapture`
    #[test]
    #[ignore = "prints timings; run by hand in release mode"]
    fn synthesis_rate() {
        for tokenizer in tokenizers() {
            let synth = Synthesizer::new(&tokenizer).expect("synthesizer");
            let start = std::time::Instant::now();
            let prompts = synthetic_prompts(&synth, &spec(LengthDistribution::Fixed(1000), 10_000))
                .expect("prompts");
            println!(
                "{}: {} prompts of 1000 tokens in {:?}",
                tokenizer.name(),
                prompts.len(),
                start.elapsed()
            );
        }
    }
}
