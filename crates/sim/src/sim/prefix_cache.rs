//! The simulator's prefix cache, modelled on vLLM v1's automatic prefix caching so that a benchmark of
//! prefix-sharing workloads sees hits where vLLM would report them.
//!
//! What it imitates (vLLM `vllm/v1/core/kv_cache_utils.py` `hash_block_tokens` / `hash_request_tokens`,
//! `vllm/v1/core/kv_cache_manager.py` `KVCacheManager.get_computed_blocks`,
//! `vllm/v1/core/single_type_kv_cache_manager.py` `FullAttentionManager.find_longest_cache_hit` and `free`):
//! - A prompt is cut into blocks of `block_size` tokens; only full blocks are hashed, and a block's hash chains its
//!   parent's hash with its own tokens, so a block hits only when the whole prefix up to and including it matches.
//! - A request's cached tokens are the tokens of the longest run of leading blocks found in the cache, capped at
//!   `prompt_tokens − 1`: when every token hits, vLLM recomputes the last one to get its logits, and because hits
//!   are whole blocks, that cap drops the whole last block of a prompt that is an exact multiple of the block size
//!   (`max_cache_hit_length = request.num_tokens - 1`, then `max_length // block_size` blocks).
//! - After the lookup, every full block of the prompt is inserted or touched. They are touched last block first, so
//!   the LRU evicts a prompt's tail blocks before its head, as vLLM's `free` returns a request's blocks in reverse
//!   order ("so that the tail blocks are evicted first").
//!
//! What it simplifies, and why:
//! - The cache is an LRU of `capacity` blocks of its own, apart from the KV-cache usage gauge (see `metrics`): vLLM
//!   keeps cached blocks in the free pool and evicts them only when a running request needs the room, which the
//!   simulator, having no memory pressure to model, replaces by a fixed block budget.
//! - Blocks are cached at admission, not once prefill has computed them: a request admitted while another with the
//!   same prefix is still in prefill hits here, where vLLM (scheduling both in the same step) would miss. The
//!   order of admissions decides who hits, which keeps a sequential run exact.
//! - Tokens are what the simulator already counts as tokens (see `openai`): a text prompt's whitespace-separated
//!   words, a token-id prompt's ids, a chat's words of every message's text in order (no chat template, so message
//!   boundaries and roles are not part of the hash). Hashing walks the words the count already walks; there is no
//!   other tokenization.
//! - Hashes are 64-bit foldhash (its quality variant, seeded with the parent block's hash) rather than vLLM's
//!   SHA-256 or Python `hash`: the cache lives in one process, and a collision among the few million blocks a run
//!   can hold is vanishingly unlikely (about n²/2⁶⁵). SipHash, used before, was a sixth of the simulator's CPU at
//!   the ceiling.

use std::collections::HashMap;
use std::hash::{BuildHasher as _, Hash, Hasher};

use foldhash::quality::{FixedState, FoldHasher};
use std::sync::{Mutex, PoisonError};

/// vLLM's default KV-cache block size (`--block-size`, 16 on GPUs).
pub const DEFAULT_BLOCK_SIZE: u32 = 16;

/// Blocks the simulator's prefix cache holds by default: 65,536 blocks of 16 tokens are about a million tokens, the
/// KV cache of a mid-sized model on one large GPU, in a few megabytes of simulator memory.
pub(crate) const DEFAULT_BLOCKS: usize = 65_536;

/// The parent hash of a prompt's first block (vLLM's `NONE_HASH`, there random per process; fixed here so that
/// hashes, and therefore tests, are the same in every run).
const ROOT_HASH: u64 = 0x6c6c_6d62_656e_6368;

/// Chains the hashes of a prompt's full blocks as its tokens are fed one by one.
pub(crate) struct BlockHasher {
    block_size: usize,
    in_block: usize,
    hasher: FoldHasher<'static>,
    hashes: Vec<u64>,
}

impl std::fmt::Debug for BlockHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockHasher")
            .field("block_size", &self.block_size)
            .field("in_block", &self.in_block)
            .field("hashes", &self.hashes)
            .finish_non_exhaustive()
    }
}

impl BlockHasher {
    pub fn new(block_size: u32) -> Self {
        Self {
            block_size: block_size.max(1) as usize,
            in_block: 0,
            hasher: seeded(ROOT_HASH),
            hashes: Vec::new(),
        }
    }

    /// One more token of the prompt; closes a block every `block_size` tokens.
    pub fn push<T: Hash + ?Sized>(&mut self, token: &T) {
        token.hash(&mut self.hasher);
        self.in_block += 1;
        if self.in_block == self.block_size {
            let hash = self.hasher.finish();
            self.hashes.push(hash);
            self.hasher = seeded(hash);
            self.in_block = 0;
        }
    }

    /// Each whitespace-separated word of `text`, as the simulator counts tokens.
    pub(crate) fn push_words(&mut self, text: &str) {
        if !text.is_ascii() {
            text.split_whitespace().for_each(|word| self.push(word));
            return;
        }
        // The same words, found a byte at a time: Unicode's White_Space within ASCII is tab, LF, vertical tab,
        // form feed, CR and space (`split_whitespace` decoding every character was most of a prompt's hashing).
        let space = |byte: u8| matches!(byte, b'\t'..=b'\r' | b' ');
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            if space(bytes[at]) {
                at += 1;
                continue;
            }
            let start = at;
            while at < bytes.len() && !space(bytes[at]) {
                at += 1;
            }
            self.push(&text[start..at]);
        }
    }

    /// The hashes of the full blocks, first block first; a partial last block has none.
    pub fn finish(self) -> Vec<u64> {
        self.hashes
    }
}

/// A hasher seeded with the parent block's hash.
fn seeded(parent: u64) -> FoldHasher<'static> {
    FixedState::with_seed(parent).build_hasher()
}

/// The simulator's prefix cache: shared by every request, behind one short lock (a lookup and an insertion walk
/// one request's block hashes, a few thousand at most).
#[derive(Debug)]
pub(crate) struct PrefixCache {
    block_size: u32,
    lru: Option<Mutex<Lru>>,
}

impl PrefixCache {
    /// A cache of `capacity` blocks of `block_size` tokens; `capacity` 0 disables it.
    pub fn new(block_size: u32, capacity: usize) -> Self {
        Self {
            block_size: block_size.max(1),
            lru: (capacity > 0).then(|| Mutex::new(Lru::new(capacity))),
        }
    }

    /// Whether prompts are looked up at all (vLLM `--enable-prefix-caching`).
    pub fn enabled(&self) -> bool {
        self.lru.is_some()
    }

    /// A hasher for one prompt's blocks.
    pub fn hasher(&self) -> BlockHasher {
        BlockHasher::new(self.block_size)
    }

    /// Forgets every cached block (vLLM's `POST /reset_prefix_cache`); returns how many there were.
    pub fn reset(&self) -> usize {
        let Some(lru) = self.lru.as_ref() else {
            return 0;
        };
        let mut lru = lru.lock().unwrap_or_else(PoisonError::into_inner);
        let blocks = lru.slots.len();
        *lru = Lru::new(lru.capacity);
        blocks
    }

    /// Looks a prompt up and then caches its blocks; returns its cached tokens, `None` when the cache is off.
    /// `blocks` are the prompt's full-block hashes ([`BlockHasher::finish`]), `prompt_tokens` its length.
    pub fn admit(&self, blocks: &[u64], prompt_tokens: u32) -> Option<u32> {
        let lru = self.lru.as_ref()?;
        let mut lru = lru.lock().unwrap_or_else(PoisonError::into_inner);
        // vLLM's `max_cache_hit_length = num_tokens - 1`, in whole blocks.
        let max_blocks = (prompt_tokens.saturating_sub(1) / self.block_size) as usize;
        let hits = blocks
            .iter()
            .take(max_blocks)
            .take_while(|hash| lru.contains(**hash))
            .count();
        for hash in blocks.iter().rev() {
            lru.touch(*hash);
        }
        // hits ≤ prompt_tokens / block_size, so the product fits.
        Some(
            u32::try_from(hits)
                .unwrap_or(u32::MAX)
                .saturating_mul(self.block_size),
        )
    }
}

const NIL: usize = usize::MAX;

/// A least-recently-used set of block hashes: a map to slots of an intrusive doubly-linked list, most recent at
/// the head. Memory is one slot per cached block, allocated as blocks arrive, never more than `capacity`.
#[derive(Debug)]
struct Lru {
    capacity: usize,
    /// Keys are already hashes: the fast variant spreads them enough.
    slots: HashMap<u64, usize, foldhash::fast::FixedState>,
    nodes: Vec<Node>,
    head: usize,
    tail: usize,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    hash: u64,
    prev: usize,
    next: usize,
}

impl Lru {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            slots: HashMap::default(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    fn contains(&self, hash: u64) -> bool {
        self.slots.contains_key(&hash)
    }

    /// Makes `hash` the most recent block, inserting it (and evicting the least recent when full) if absent.
    fn touch(&mut self, hash: u64) {
        if let Some(&slot) = self.slots.get(&hash) {
            self.unlink(slot);
            self.push_front(slot);
            return;
        }
        let slot = if self.nodes.len() < self.capacity {
            self.nodes.push(Node {
                hash,
                prev: NIL,
                next: NIL,
            });
            self.nodes.len() - 1
        } else {
            let victim = self.tail;
            self.unlink(victim);
            self.slots.remove(&self.nodes[victim].hash);
            self.nodes[victim].hash = hash;
            victim
        };
        self.slots.insert(hash, slot);
        self.push_front(slot);
    }

    fn unlink(&mut self, slot: usize) {
        let Node { prev, next, .. } = self.nodes[slot];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next].prev = prev;
        }
    }

    fn push_front(&mut self, slot: usize) {
        self.nodes[slot].prev = NIL;
        self.nodes[slot].next = self.head;
        if self.head != NIL {
            self.nodes[self.head].prev = slot;
        }
        self.head = slot;
        if self.tail == NIL {
            self.tail = slot;
        }
    }

    /// Cached hashes, most recent first (tests).
    #[cfg(test)]
    fn order(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut slot = self.head;
        while slot != NIL {
            out.push(self.nodes[slot].hash);
            slot = self.nodes[slot].next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block hashes of `text`'s words with blocks of `block_size`.
    fn hashes(text: &str, block_size: u32) -> Vec<u64> {
        let mut hasher = BlockHasher::new(block_size);
        hasher.push_words(text);
        hasher.finish()
    }

    fn words(n: usize, prefix: &str) -> String {
        (0..n)
            .map(|i| format!("{prefix}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn ascii_prompts_are_cut_into_the_words_split_whitespace_finds() {
        let by_split_whitespace = |text: &str| {
            let mut hasher = BlockHasher::new(2);
            text.split_whitespace().for_each(|word| hasher.push(word));
            hasher.finish()
        };
        for text in [
            "",
            " ",
            "one",
            "a b c d e f",
            "  lead and trail  ",
            "tab\tlf\nvt\x0bff\x0ccr\rsp end",
            "\x0b\x0ca\x0b\x0bb\x0c",
            // Not whitespace to either: the unit and file separators, DEL.
            "a\x1fb\x1cc\x7fd e",
            // Non-ASCII text takes split_whitespace itself: no-break space and NEL are spaces there.
            "é\u{a0}b\u{85}c d",
        ] {
            assert_eq!(hashes(text, 2), by_split_whitespace(text), "{text:?}");
        }
        assert_eq!(hashes("tab\tlf\nvt\x0bff\x0ccr\rsp end", 1).len(), 7);
    }

    #[test]
    fn only_full_blocks_are_hashed_and_each_hash_chains_its_prefix() {
        // 10 words in blocks of 4: two full blocks (words 0–3, 4–7), words 8–9 unhashed.
        let a = hashes(&words(10, "w"), 4);
        assert_eq!(a.len(), 2);
        // The same second block after a different first block hashes differently: the hash carries the prefix.
        let b = hashes("x0 x1 x2 x3 w4 w5 w6 w7", 4);
        assert_ne!(a[0], b[0]);
        assert_ne!(a[1], b[1]);
        // Same words, same hashes; whitespace does not matter, as it does not to the token count.
        assert_eq!(hashes("w0  w1\nw2 w3", 4), vec![a[0]]);
    }

    #[test]
    fn prompts_sharing_ten_tokens_with_blocks_of_four_cache_eight() {
        let cache = PrefixCache::new(4, 100);
        let shared = words(10, "s");
        let first = format!("{shared} {}", words(6, "a"));
        let second = format!("{shared} {}", words(6, "b"));
        // 16 tokens each: 4 full blocks. The first finds nothing.
        assert_eq!(cache.admit(&hashes(&first, 4), 16), Some(0));
        // The second shares tokens 0–9: blocks 0–3 and 4–7 match, block 8–11 holds a2 a3 vs b0 b1.
        assert_eq!(cache.admit(&hashes(&second, 4), 16), Some(8));
    }

    #[test]
    fn a_whole_prompt_hit_still_recomputes_its_last_block() {
        let cache = PrefixCache::new(4, 100);
        let prompt = words(8, "p");
        assert_eq!(cache.admit(&hashes(&prompt, 4), 8), Some(0));
        // Both blocks are cached, but the hit is capped at 8 − 1 = 7 tokens, 1 whole block: 4 tokens.
        assert_eq!(cache.admit(&hashes(&prompt, 4), 8), Some(4));
        // 9 tokens (one past the blocks): the cap 8 allows both blocks.
        let longer = format!("{prompt} extra");
        assert_eq!(cache.admit(&hashes(&longer, 4), 9), Some(8));
    }

    #[test]
    fn a_miss_ends_the_hit_even_when_later_blocks_are_cached() {
        let cache = PrefixCache::new(2, 100);
        // Cache a b | c d | e f, then evict nothing but ask with a different first block: no hit at all, though
        // the text of later blocks is the same (their chained hashes are not).
        assert_eq!(cache.admit(&hashes("a b c d e f", 2), 6), Some(0));
        assert_eq!(cache.admit(&hashes("z z c d e f g", 2), 7), Some(0));
    }

    #[test]
    fn a_disabled_cache_reports_nothing() {
        let cache = PrefixCache::new(16, 0);
        assert!(!cache.enabled());
        assert_eq!(cache.admit(&[1, 2, 3], 64), None);
    }

    #[test]
    fn the_lru_evicts_the_least_recent_block_first() {
        let mut lru = Lru::new(3);
        for hash in [1, 2, 3] {
            lru.touch(hash);
        }
        assert_eq!(lru.order(), [3, 2, 1]);
        // Touching 1 makes it the most recent; inserting 4 then evicts 2, the least recent.
        lru.touch(1);
        lru.touch(4);
        assert_eq!(lru.order(), [4, 1, 3]);
        assert!(!lru.contains(2));
        lru.touch(5);
        assert_eq!(lru.order(), [5, 4, 1]);
        assert!(!lru.contains(3));
    }

    #[test]
    fn a_prompts_tail_blocks_are_evicted_before_its_head() {
        // Capacity 3 blocks of 2 tokens. Prompt A (a0…a5) caches A0, A1, A2, touched A2, A1, A0: A0 most recent.
        let cache = PrefixCache::new(2, 3);
        let a = hashes("a0 a1 a2 a3 a4 a5", 2);
        assert_eq!(cache.admit(&a, 6), Some(0));
        // Prompt B (one block) evicts the least recent, A2, and keeps A's head.
        assert_eq!(cache.admit(&hashes("b0 b1", 2), 2), Some(0));
        let lru = cache.lru.as_ref().expect("enabled");
        let order = lru.lock().expect("lock").order();
        assert_eq!(order.len(), 3);
        assert!(!order.contains(&a[2]));
        // A again (7 tokens, so the cap allows 3 blocks): A0 and A1 hit, A2 was evicted.
        let a_longer = hashes("a0 a1 a2 a3 a4 a5 a6", 2);
        assert_eq!(cache.admit(&a_longer, 7), Some(4));
    }

    #[test]
    fn a_prompt_longer_than_the_cache_keeps_its_head() {
        // 5 blocks into room for 2: inserted last block first, so blocks 0 and 1 stay.
        let cache = PrefixCache::new(1, 2);
        let prompt = hashes("a b c d e", 1);
        assert_eq!(cache.admit(&prompt, 5), Some(0));
        // The cap is 4 tokens; blocks 0 and 1 hit, block 2 is gone.
        assert_eq!(cache.admit(&prompt, 5), Some(2));
    }

    #[test]
    fn token_ids_hash_by_value() {
        let mut a = BlockHasher::new(2);
        let mut b = BlockHasher::new(2);
        for id in [5u32, 6, 7, 8] {
            a.push(&id);
            b.push(&id);
        }
        b.push(&9u32);
        assert_eq!(a.finish(), b.finish());
    }
}
