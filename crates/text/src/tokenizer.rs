//! The run's tokenizer, used before the clock starts to build prompts of exact token lengths and to count the
//! tokens of dataset prompts.
//!
//! A spec names one of:
//! - a `tokenizer.json` file, or a directory holding one;
//! - a Hugging Face model id, whose `tokenizer.json` is downloaded once (honouring `HF_ENDPOINT`, `HF_TOKEN`,
//!   `HF_HUB_OFFLINE` and the hub cache: `HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`) and
//!   read from the cache afterwards, with no network;
//! - [`BUILTIN`], a word-level tokenizer that needs no file and counts tokens exactly as the embedded simulator
//!   counts prompt tokens (whitespace-separated words), so a run against `llmbench sim` gets exact lengths too.
//!
//! Token counts (`count`, `encode`) never include the special tokens a tokenizer adds around a prompt (BOS and the
//! like): they are the text's own tokens. How many it adds is [`Tokenizer::added_special_tokens`]; whether a
//! profile's "N tokens" counts them is each tool's own choice, which the `prompts` module follows.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// The spec of the built-in word-level tokenizer.
pub const BUILTIN: &str = "builtin";
/// Another spelling of [`BUILTIN`], naming what the tokens are.
pub(crate) const BUILTIN_WORDS: &str = "builtin:words";

const HUB_ENDPOINT: &str = "https://huggingface.co";
const TOKENIZER_FILE: &str = "tokenizer.json";
/// The most "plain word" tokens kept for synthesis; the lowest ids of a BPE vocabulary are its commonest merges.
const MAX_PLAIN_WORDS: usize = 8192;

/// Why a tokenizer could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("cannot read tokenizer file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid tokenizer.json: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("directory {dir} holds no tokenizer.json")]
    NoTokenizerJson { dir: PathBuf },
    #[error(
        "tokenizer `{spec}` is not a tokenizer.json file, a directory holding one, a Hugging Face model id, or `{BUILTIN}`"
    )]
    Unrecognised { spec: String },
    #[error("cannot download {url}: {source}")]
    HubRequest { url: String, source: reqwest::Error },
    #[error(
        "cannot reach the Hugging Face hub to download the tokenizer {url} ({cause}); use --tokenizer builtin or a \
         tokenizer.json (a file, or a directory holding one), or set HF_ENDPOINT to a hub mirror you can reach"
    )]
    HubUnreachable { url: String, cause: String },
    #[error(
        "the Hugging Face hub refused {repo} (HTTP {status}): the model is gated, private or does not exist{hint}",
        hint = if *token_set { "; check that HF_TOKEN grants access and that its license was accepted on the hub" } else { "; accept its license on the hub and set HF_TOKEN" }
    )]
    HubUnauthorized {
        repo: String,
        status: u16,
        token_set: bool,
    },
    #[error(
        "{repo} has no tokenizer.json at revision {revision} on {endpoint} (HTTP 404): check the model id"
    )]
    HubNotFound {
        repo: String,
        revision: String,
        endpoint: String,
    },
    #[error("downloading {url} failed with HTTP {status}")]
    HubStatus { url: String, status: u16 },
    #[error(
        "{repo} is not in the hub cache {cache} and HF_HUB_OFFLINE is set; use --tokenizer builtin or a \
         tokenizer.json"
    )]
    Offline { repo: String, cache: PathBuf },
    #[error("cannot write the hub cache file {path}: {source}")]
    CacheWrite {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tokenizer {tokenizer} cannot encode text: {message}")]
    Encode { tokenizer: String, message: String },
    #[error("tokenizer {tokenizer} cannot decode token ids: {message}")]
    Decode { tokenizer: String, message: String },
}

/// Where and how tokenizers are fetched from the Hugging Face hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubOptions {
    /// `HF_ENDPOINT`, default `https://huggingface.co`.
    pub endpoint: String,
    /// `HF_TOKEN` (or `HUGGING_FACE_HUB_TOKEN`), sent as a bearer token.
    pub token: Option<String>,
    /// The hub cache directory (same layout as `huggingface_hub`: `models--org--name/snapshots/<rev>/`).
    pub cache_dir: PathBuf,
    /// The revision to download, `main` unless told otherwise.
    pub revision: String,
    /// `HF_HUB_OFFLINE`: never download, use the cache only.
    pub offline: bool,
}

impl HubOptions {
    /// The options `huggingface_hub` would use in this environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// The options for an environment given as a lookup (testable without touching the process environment).
    pub(crate) fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Self {
        let cache_dir = var("HF_HUB_CACHE")
            .map(PathBuf::from)
            .or_else(|| var("HF_HOME").map(|home| PathBuf::from(home).join("hub")))
            .or_else(|| {
                var("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("huggingface").join("hub"))
            })
            .or_else(|| {
                var("HOME").map(|h| {
                    PathBuf::from(h)
                        .join(".cache")
                        .join("huggingface")
                        .join("hub")
                })
            })
            .unwrap_or_else(|| PathBuf::from(".cache/huggingface/hub"));
        HubOptions {
            endpoint: var("HF_ENDPOINT")
                .unwrap_or_else(|| HUB_ENDPOINT.to_owned())
                .trim_end_matches('/')
                .to_owned(),
            token: var("HF_TOKEN").or_else(|| var("HUGGING_FACE_HUB_TOKEN")),
            cache_dir,
            revision: "main".to_owned(),
            // huggingface_hub's truthy values, in any case.
            offline: var("HF_HUB_OFFLINE").is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_uppercase().as_str(),
                    "1" | "ON" | "YES" | "TRUE"
                )
            }),
        }
    }
}

/// A loaded tokenizer: a Hugging Face `tokenizer.json`, or the built-in word tokenizer.
#[derive(Clone)]
pub struct Tokenizer {
    name: String,
    backend: Backend,
    /// The directory its tokenizer.json was read from, where its `tokenizer_config.json` (and chat template)
    /// sits; `None` for the built-in tokenizer and one read from memory.
    directory: Option<PathBuf>,
}

#[derive(Clone)]
enum Backend {
    Words(WordVocabulary),
    Hf(Box<tokenizers::Tokenizer>),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// The built-in word-level tokenizer.
    pub fn builtin() -> Self {
        Tokenizer {
            name: BUILTIN.to_owned(),
            backend: Backend::Words(WordVocabulary::new()),
            directory: None,
        }
    }

    /// A `tokenizer.json` already in memory; `name` says where it came from in messages.
    pub(crate) fn from_json_bytes(name: &str, bytes: &[u8]) -> Result<Self, TokenizerError> {
        let mut inner =
            tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| TokenizerError::Parse {
                path: PathBuf::from(name),
                message: e.to_string(),
            })?;
        // A tokenizer.json may ship truncation or padding settings for training; counting prompts needs neither,
        // and both could make encoding fail or lie about lengths.
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| TokenizerError::Parse {
                path: PathBuf::from(name),
                message: e.to_string(),
            })?;
        Ok(Tokenizer {
            name: name.to_owned(),
            backend: Backend::Hf(Box::new(inner)),
            directory: None,
        })
    }

    /// A `tokenizer.json` file.
    pub fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let bytes = std::fs::read(path).map_err(|source| TokenizerError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut tokenizer = Self::from_json_bytes(&path.display().to_string(), &bytes)?;
        tokenizer.directory = path.parent().map(Path::to_owned);
        Ok(tokenizer)
    }

    /// The directory its tokenizer.json came from (where `tokenizer_config.json` and the chat template sit).
    pub fn directory(&self) -> Option<&Path> {
        self.directory.as_deref()
    }

    /// Where the tokenizer came from: a path, a model id, or `builtin`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is the built-in word tokenizer.
    pub fn is_builtin(&self) -> bool {
        matches!(self.backend, Backend::Words(_))
    }

    /// The token ids of `text`, without special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        match &self.backend {
            Backend::Words(words) => Ok(words.encode(text)),
            Backend::Hf(inner) => inner
                .encode_fast(text, false)
                .map(|encoding| encoding.get_ids().to_vec())
                .map_err(|e| TokenizerError::Encode {
                    tokenizer: self.name.clone(),
                    message: e.to_string(),
                }),
        }
    }

    /// The token ids of `text` with the special tokens the tokenizer adds (Hugging Face's `encode(text)`).
    pub fn encode_with_special_tokens(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        match &self.backend {
            Backend::Words(words) => Ok(words.encode(text)),
            Backend::Hf(inner) => inner
                .encode_fast(text, true)
                .map(|encoding| encoding.get_ids().to_vec())
                .map_err(|e| TokenizerError::Encode {
                    tokenizer: self.name.clone(),
                    message: e.to_string(),
                }),
        }
    }

    /// The text of `ids` (special tokens kept, as `vllm bench` decodes).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        match &self.backend {
            Backend::Words(words) => Ok(words.decode(ids)),
            Backend::Hf(inner) => inner
                .decode(ids, false)
                .map_err(|e| TokenizerError::Decode {
                    tokenizer: self.name.clone(),
                    message: e.to_string(),
                }),
        }
    }

    /// How many tokens `text` is, without special tokens.
    pub fn count(&self, text: &str) -> Result<u32, TokenizerError> {
        let n = match &self.backend {
            Backend::Words(_) => word_count(text),
            Backend::Hf(_) => self.encode(text)?.len(),
        };
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The special tokens this tokenizer adds around one text when asked to (its post-processor's BOS, EOS, …):
    /// what a server that tokenizes the prompt itself counts on top of the prompt's own tokens, and what Hugging
    /// Face's `num_special_tokens_to_add()` returns. The built-in word tokenizer adds none.
    pub fn added_special_tokens(&self) -> Result<AddedSpecialTokens, TokenizerError> {
        let Backend::Hf(inner) = &self.backend else {
            return Ok(AddedSpecialTokens::default());
        };
        // Any non-empty text shows where the post-processor puts its tokens.
        let encoding = inner
            .encode_fast("a", true)
            .map_err(|e| TokenizerError::Encode {
                tokenizer: self.name.clone(),
                message: e.to_string(),
            })?;
        let mask = encoding.get_special_tokens_mask();
        let leading = mask.iter().take_while(|&&m| m == 1).count();
        let total = mask.iter().filter(|&&m| m == 1).count();
        Ok(AddedSpecialTokens {
            leading: u32::try_from(leading).unwrap_or(u32::MAX),
            total: u32::try_from(total).unwrap_or(u32::MAX),
        })
    }

    /// The base vocabulary's size, added tokens left out (Hugging Face's `tokenizer.vocab_size`); for the
    /// built-in tokenizer its word list, not the words it learns as it encodes.
    pub fn base_vocab_size(&self) -> usize {
        match &self.backend {
            Backend::Words(words) => words.builtin,
            Backend::Hf(inner) => inner.get_vocab_size(false),
        }
    }

    /// The vocabulary size, added tokens included.
    #[cfg(any(test, feature = "testing"))]
    pub fn vocab_size(&self) -> usize {
        match &self.backend {
            Backend::Words(words) => words.len(),
            Backend::Hf(inner) => inner.get_vocab_size(true),
        }
    }

    /// Token ids that are each one whole lower-case word: a sequence of them decodes to words separated by
    /// single spaces, and that text encodes back to the same ids (checked on each token and on a pair of it).
    /// Synthesis draws prompts from these, so random prompts read as words and survive re-encoding.
    pub fn plain_words(&self) -> Vec<u32> {
        match &self.backend {
            Backend::Words(words) => (0..words.builtin as u32).collect(),
            Backend::Hf(inner) => hf_plain_words(self, inner),
        }
    }
}

/// The special tokens a tokenizer adds around one text ([`Tokenizer::added_special_tokens`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddedSpecialTokens {
    /// Those before the text's own tokens (a BOS).
    pub leading: u32,
    /// All of them, before and after (`num_special_tokens_to_add()`).
    pub total: u32,
}

/// `text.split_whitespace().count()`, with a byte loop for ASCII text. The simulator counts every prompt this way,
/// and the char-by-char Unicode walk was its largest single cost at the client-bound ceiling.
pub fn word_count(text: &str) -> usize {
    if !text.is_ascii() {
        return text.split_whitespace().count();
    }
    // Unicode's White_Space within ASCII: tab, LF, vertical tab, form feed, CR, space.
    let space = |byte: u8| matches!(byte, b'\t'..=b'\r' | b' ');
    let bytes = text.as_bytes();
    let Some(&first) = bytes.first() else {
        return 0;
    };
    // A word starts wherever a space is followed by a non-space. Counted in blocks whose count fits a byte, so
    // the compiler can vectorise the comparisons.
    let (before, at) = (&bytes[..bytes.len() - 1], &bytes[1..]);
    let mut words = usize::from(!space(first));
    for (before, at) in before.chunks(255).zip(at.chunks(255)) {
        let starts: u8 = before
            .iter()
            .zip(at)
            .map(|(&b, &a)| u8::from(space(b) & !space(a)))
            .fold(0, u8::wrapping_add);
        words += usize::from(starts);
    }
    words
}

/// The ids of `inner`'s vocabulary that behave as separable words, lowest ids first.
fn hf_plain_words(tokenizer: &Tokenizer, inner: &tokenizers::Tokenizer) -> Vec<u32> {
    let added = inner.get_added_tokens_decoder();
    let mut candidates: Vec<(u32, String)> = inner
        .get_vocab(false)
        .into_iter()
        .filter(|(_, id)| !added.contains_key(id))
        .filter(|(token, _)| {
            // The raw token: an optional word-start marker (GPT-2's `Ġ`, SentencePiece's `▁`), then letters.
            let letters = token.trim_start_matches(['Ġ', '▁']);
            (2..=16).contains(&letters.len()) && letters.bytes().all(|b| b.is_ascii_lowercase())
        })
        .map(|(token, id)| (id, token))
        .collect();
    candidates.sort_unstable_by_key(|(id, _)| *id);
    let mut words = Vec::new();
    for (id, _) in candidates {
        if words.len() >= MAX_PLAIN_WORDS {
            break;
        }
        let (Ok(single), Ok(pair)) = (tokenizer.decode(&[id]), tokenizer.decode(&[id, id])) else {
            continue;
        };
        let word = single.trim_start_matches(' ');
        let separable = (2..=16).contains(&word.len())
            && word.bytes().all(|b| b.is_ascii_lowercase())
            && pair.len() == single.len() + 1 + word.len()
            && pair.starts_with(&single)
            && pair.ends_with(&format!(" {word}"));
        if separable && tokenizer.encode(&pair).is_ok_and(|ids| ids == [id, id]) {
            words.push(id);
        }
    }
    words
}

/// The built-in vocabulary: one token per whitespace-separated word. It starts with common English words (the
/// words synthesis draws from) and learns every other word it meets, so decoding gives back what was encoded (a
/// corpus or a dataset prompt survives a round trip) and the count is always the simulator's word count.
#[derive(Clone)]
struct WordVocabulary {
    /// How many of the words are the built-in list (the plain words for synthesis).
    builtin: usize,
    table: Arc<RwLock<WordTable>>,
}

#[derive(Default)]
struct WordTable {
    words: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, u32>,
}

impl WordTable {
    fn intern(&mut self, word: &str) -> u32 {
        if let Some(id) = self.ids.get(word) {
            return *id;
        }
        let id = u32::try_from(self.words.len()).unwrap_or(u32::MAX);
        let word: Arc<str> = Arc::from(word);
        self.words.push(Arc::clone(&word));
        self.ids.insert(word, id);
        id
    }
}

/// The built-in word list. Short, common and all distinct, so a synthetic prompt reads as (odd) English.
const BUILTIN_WORDS_LIST: &str = "the of and to in is was for that with as on by at from his her are were this which be \
    or an had not but have its they one all has their been more who also after first new other time two when into \
    there would some these only them can over most such many well made then than years year about out may three later \
    while during people world city part under state where both between through being since known each used family \
    against work school called before life four each long high during small number early great water house place \
    name music group back team along south north east west around country season again until left home war began \
    end government film second including play side following found five often area among much three public several \
    under became became best light general major national order point power rather river road show town village \
    way same another book early field form game line man men might must never next night now old open own party \
    quite right round run say set should six still system take thing though three through turn upon use very want \
    week while why wide word write young always answer body bring build carry change close color course cut deep \
    door draw earth even every eye face fall far feel fire fish food foot free friend full give gold good green \
    ground grow half hand hard head hear heart help hold horse hour idea keep kind king land large last learn leave \
    letter list little live look love low mark mean mind money moon morning mother mountain move near note paper \
    pass picture plant pull rain read red rest rock room sea seem ship short simple sing sky sleep slow snow song \
    sound space stand star start stone story street strong study sun table tail talk tell test thought tree true \
    try voice walk warm watch wave weather white wind window winter wood yellow";

impl WordVocabulary {
    fn new() -> Self {
        let mut table = WordTable::default();
        for word in BUILTIN_WORDS_LIST.split_whitespace() {
            table.intern(word);
        }
        WordVocabulary {
            builtin: table.words.len(),
            table: Arc::new(RwLock::new(table)),
        }
    }

    #[cfg(any(test, feature = "testing"))]
    fn len(&self) -> usize {
        self.table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .words
            .len()
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        {
            let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
            let known: Option<Vec<u32>> = text
                .split_whitespace()
                .map(|w| table.ids.get(w).copied())
                .collect();
            if let Some(ids) = known {
                return ids;
            }
        }
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        text.split_whitespace().map(|w| table.intern(w)).collect()
    }

    fn decode(&self, ids: &[u32]) -> String {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        let mut text = String::with_capacity(ids.len() * 6);
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(table.words.get(*id as usize).map_or("<unk>", |w| w));
        }
        text
    }
}

/// Loads the tokenizer `spec` names (see the module docs for the forms).
pub async fn load_tokenizer(spec: &str, hub: &HubOptions) -> Result<Tokenizer, TokenizerError> {
    if spec == BUILTIN || spec == BUILTIN_WORDS {
        return Ok(Tokenizer::builtin());
    }
    let path = Path::new(spec);
    if path.is_file() {
        return Tokenizer::from_file(path);
    }
    if path.is_dir() {
        let file = path.join(TOKENIZER_FILE);
        if !file.is_file() {
            return Err(TokenizerError::NoTokenizerJson {
                dir: path.to_owned(),
            });
        }
        return Tokenizer::from_file(&file);
    }
    // A missing file is reported as one, not looked up on the hub.
    if spec.ends_with(".json") {
        return Tokenizer::from_file(path);
    }
    if !is_repo_id(spec) {
        return Err(TokenizerError::Unrecognised {
            spec: spec.to_owned(),
        });
    }
    let file = hub_tokenizer_file(spec, hub).await?;
    let bytes = std::fs::read(&file).map_err(|source| TokenizerError::Read {
        path: file.clone(),
        source,
    })?;
    let mut tokenizer = Tokenizer::from_json_bytes(spec, &bytes)?;
    // The hub snapshot's directory: its tokenizer_config.json is there when the cache holds it.
    tokenizer.directory = file.parent().map(Path::to_owned);
    Ok(tokenizer)
}

/// `name` or `org/name`, in the characters the hub allows.
fn is_repo_id(spec: &str) -> bool {
    let parts: Vec<&str> = spec.split('/').collect();
    parts.len() <= 2
        && parts.iter().all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && !part.contains("..")
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
}

/// The repo's directory in the hub cache, as `huggingface_hub` names it.
fn repo_cache_dir(repo: &str, hub: &HubOptions) -> PathBuf {
    hub.cache_dir
        .join(format!("models--{}", repo.replace('/', "--")))
}

/// The cached `tokenizer.json` of `repo` at the configured revision, if any: `refs/<revision>` names the
/// snapshot, as `huggingface_hub` writes it; a revision that is itself a snapshot name is used directly.
fn cached_tokenizer_file(repo: &str, hub: &HubOptions) -> Option<PathBuf> {
    let dir = repo_cache_dir(repo, hub);
    let snapshot = std::fs::read_to_string(dir.join("refs").join(&hub.revision))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| hub.revision.clone());
    let file = dir.join("snapshots").join(snapshot).join(TOKENIZER_FILE);
    file.is_file().then_some(file)
}

/// The local path of `repo`'s `tokenizer.json`, downloading it into the cache when it is not there.
async fn hub_tokenizer_file(repo: &str, hub: &HubOptions) -> Result<PathBuf, TokenizerError> {
    if let Some(file) = cached_tokenizer_file(repo, hub) {
        tracing::debug!(repo, file = %file.display(), "tokenizer from the hub cache");
        return Ok(file);
    }
    if hub.offline {
        return Err(TokenizerError::Offline {
            repo: repo.to_owned(),
            cache: hub.cache_dir.clone(),
        });
    }
    let url = format!(
        "{}/{repo}/resolve/{}/{TOKENIZER_FILE}",
        hub.endpoint, hub.revision
    );
    tracing::info!(url, "downloading tokenizer");
    let request_error = |source| TokenizerError::HubRequest {
        url: url.clone(),
        source,
    };
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(request_error)?;
    let mut request = client.get(&url);
    if let Some(token) = &hub.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|source| {
        // No answer at all (DNS, refused, timed out): the machine is offline, or the hub is blocked.
        if source.is_connect() || source.is_timeout() {
            TokenizerError::HubUnreachable {
                url: url.clone(),
                cause: root_cause(&source),
            }
        } else {
            request_error(source)
        }
    })?;
    let status = response.status().as_u16();
    match status {
        200..=299 => {}
        401 | 403 => {
            return Err(TokenizerError::HubUnauthorized {
                repo: repo.to_owned(),
                status,
                token_set: hub.token.is_some(),
            });
        }
        404 => {
            return Err(TokenizerError::HubNotFound {
                repo: repo.to_owned(),
                revision: hub.revision.clone(),
                endpoint: hub.endpoint.clone(),
            });
        }
        _ => return Err(TokenizerError::HubStatus { url, status }),
    }
    // The commit the file came from names the snapshot, as in huggingface_hub's cache; without it, the revision.
    let snapshot = response
        .headers()
        .get("x-repo-commit")
        .and_then(|v| v.to_str().ok())
        .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric()))
        .map_or_else(|| hub.revision.clone(), str::to_owned);
    let bytes = response.bytes().await.map_err(request_error)?;
    // Refuse to cache what cannot be parsed (an HTML error page, a truncated body).
    Tokenizer::from_json_bytes(repo, &bytes)?;

    let dir = repo_cache_dir(repo, hub);
    let file = dir.join("snapshots").join(&snapshot).join(TOKENIZER_FILE);
    write_atomically(&file, &bytes)?;
    if snapshot != hub.revision {
        write_atomically(&dir.join("refs").join(&hub.revision), snapshot.as_bytes())?;
    }
    Ok(file)
}

/// The innermost cause of `error` ("failed to lookup address information: …", "Connection refused (os error
/// 111)"), which says more than reqwest's "error sending request".
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Writes through a temporary file and a rename, so a concurrent reader (another launcher pod sharing the
/// cache) never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), TokenizerError> {
    let error = |source| TokenizerError::CacheWrite {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(error)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("download"),
        std::process::id()
    ));
    let mut file = std::fs::File::create(&tmp).map_err(error)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(error)?;
    std::fs::rename(&tmp, path).map_err(error)
}

/// Test helpers: real BPE tokenizers built in code, so tests need no download.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use std::sync::OnceLock;

    use tokenizers::decoders::DecoderWrapper;
    use tokenizers::models::TrainerWrapper;
    use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
    use tokenizers::pre_tokenizers::PreTokenizerWrapper;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
    use tokenizers::{AddedToken, Tokenizer as HfTokenizer};

    /// Which family of real tokenizers to imitate.
    #[derive(Debug, Clone, Copy)]
    pub enum Style {
        /// GPT-2 / Llama 3: byte-level BPE, words carry their leading space (`Ġword`).
        ByteLevel,
        /// Llama 2 / Mistral: SentencePiece-style BPE, `▁word`, the leading space dropped when decoding.
        Metaspace,
    }

    /// Text to train on: varied English-like words, punctuation and digits.
    pub fn training_text() -> Vec<String> {
        let base = "The quick brown fox jumps over the lazy dog. A benchmark measures time to first token, \
                    inter-token latency and throughput; servers batch requests, cache prefixes and stream tokens! \
                    Numbers like 12345 and 3.14 appear, as do words such as tokenizer, tokenization, tokens, \
                    river, mountain, window, weather, yellow, morning, quickly, jumping, benchmarks.";
        let words: Vec<&str> = base.split_whitespace().collect();
        (0..400)
            .map(|i| {
                (0..40)
                    .map(|j| words[(i * 7 + j * 13 + i * j) % words.len()])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    /// A trained BPE tokenizer serialised as `tokenizer.json` bytes.
    pub fn bpe_json(style: Style, vocab_size: usize) -> Vec<u8> {
        let mut tokenizer = HfTokenizer::new(BPE::default());
        let (pre, dec): (PreTokenizerWrapper, DecoderWrapper) = match style {
            Style::ByteLevel => (
                ByteLevel::new(false, true, true).into(),
                ByteLevel::new(false, true, true).into(),
            ),
            Style::Metaspace => (
                Metaspace::new('▁', PrependScheme::First, true).into(),
                Metaspace::new('▁', PrependScheme::First, true).into(),
            ),
        };
        tokenizer.with_pre_tokenizer(Some(pre));
        tokenizer.with_decoder(Some(dec));
        let mut builder = BpeTrainerBuilder::new()
            .vocab_size(vocab_size)
            .min_frequency(1)
            .show_progress(false)
            .special_tokens(vec![
                AddedToken::from("<s>", true),
                AddedToken::from("</s>", true),
            ]);
        if matches!(style, Style::ByteLevel) {
            builder = builder.initial_alphabet(ByteLevel::alphabet().into_iter().collect());
        }
        let mut trainer: TrainerWrapper = builder.build().into();
        tokenizer
            .train(&mut trainer, training_text().into_iter())
            .expect("training a test tokenizer");
        tokenizer
            .to_string(false)
            .expect("serialising a test tokenizer")
            .into_bytes()
    }

    /// The real-engine tests' tokenizer (`tests/fixtures/tokenizers/bos-bpe`): a byte-level BPE whose
    /// post-processor puts `<|bos|>` before every text, as Llama's do.
    pub fn bos_bpe() -> super::Tokenizer {
        super::Tokenizer::from_file(std::path::Path::new(BOS_BPE))
            .expect("loading the bos-bpe fixture")
    }

    /// Where [`bos_bpe`] is.
    pub const BOS_BPE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../launcher/tests/fixtures/tokenizers/bos-bpe/tokenizer.json"
    );

    /// A loaded test tokenizer of `style`, trained once per test binary.
    pub fn bpe(style: Style) -> super::Tokenizer {
        static TRAINED: [OnceLock<super::Tokenizer>; 2] = [OnceLock::new(), OnceLock::new()];
        TRAINED[style as usize]
            .get_or_init(|| {
                super::Tokenizer::from_json_bytes(
                    &format!("test-bpe-{style:?}"),
                    &bpe_json(style, 600),
                )
                .expect("loading a test tokenizer")
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::extract::{Path as UrlPath, State};
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::get;

    use super::testing::{Style, bpe, bpe_json};
    use super::*;

    #[test]
    fn word_count_agrees_with_split_whitespace_on_ascii_and_unicode() {
        for text in [
            "",
            " ",
            "one",
            "  two words ",
            "tab\tnewline\ncr\rvt\x0bff\x0cend",
            "\x0b\x0c",
            "non\u{a0}breaking and\u{2003}em space",
            "naïve café",
            "a\u{85}b",
        ] {
            assert_eq!(
                word_count(text),
                text.split_whitespace().count(),
                "{text:?}"
            );
        }
        // Long enough to cross the counting blocks at every offset, words of every length.
        let separators = [" ", "  ", "\t", "\n", " \r\n"];
        let long: String = (0..2_000)
            .map(|i| format!("{}{}", "w".repeat(i % 7), separators[i % separators.len()]))
            .collect();
        for start in 0..8 {
            let text = &long[start..];
            assert_eq!(
                word_count(text),
                text.split_whitespace().count(),
                "from {start}"
            );
        }
    }

    #[test]
    fn builtin_words_round_trip_unknown_words_included() {
        let tokenizer = Tokenizer::builtin();
        let ids = tokenizer.encode("the river and the sea").expect("encode");
        assert_eq!(ids.len(), 5);
        assert_eq!(
            tokenizer.decode(&ids).expect("decode"),
            "the river and the sea"
        );
        let plain = tokenizer.plain_words().len();
        assert!(plain > 200);
        let unknown = tokenizer
            .encode("zyzzyva, qwertz! zyzzyva,")
            .expect("encode");
        assert_eq!(unknown.len(), 3);
        assert_eq!(unknown[0], unknown[2]);
        assert_eq!(
            tokenizer.decode(&unknown).expect("decode"),
            "zyzzyva, qwertz! zyzzyva,"
        );
        assert_eq!(
            tokenizer.plain_words().len(),
            plain,
            "learnt words are not drawn by synthesis"
        );
    }

    #[test]
    fn plain_words_of_a_bpe_tokenizer_re_encode_to_themselves_in_sequence() {
        for style in [Style::ByteLevel, Style::Metaspace] {
            let tokenizer = bpe(style);
            let words = tokenizer.plain_words();
            assert!(
                words.len() >= 20,
                "{style:?}: only {} plain words",
                words.len()
            );
            let ids: Vec<u32> = words.iter().cycle().take(500).copied().collect();
            let text = tokenizer.decode(&ids).expect("decode");
            assert_eq!(
                tokenizer.encode(&text).expect("encode"),
                ids,
                "{style:?}: {text:?}"
            );
        }
    }

    #[test]
    fn repo_ids_are_told_from_paths() {
        assert!(is_repo_id("gpt2"));
        assert!(is_repo_id("meta-llama/Llama-3.1-8B-Instruct"));
        assert!(!is_repo_id("./tokenizer.json"));
        assert!(!is_repo_id("/abs/path"));
        assert!(!is_repo_id("a/b/c"));
        assert!(!is_repo_id("org/../x"));
    }

    #[test]
    fn hub_options_follow_the_huggingface_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let defaults = HubOptions::from_lookup(env(&[("HOME", "/home/u")]));
        assert_eq!(defaults.endpoint, "https://huggingface.co");
        assert_eq!(
            defaults.cache_dir,
            PathBuf::from("/home/u/.cache/huggingface/hub")
        );
        assert_eq!(defaults.token, None);
        let home = HubOptions::from_lookup(env(&[
            ("HF_HOME", "/requests/.cache/hf"),
            ("HUGGING_FACE_HUB_TOKEN", "t"),
        ]));
        assert_eq!(home.cache_dir, PathBuf::from("/requests/.cache/hf/hub"));
        assert_eq!(home.token.as_deref(), Some("t"));
        let explicit = HubOptions::from_lookup(env(&[
            ("HF_HUB_CACHE", "/c"),
            ("HF_HOME", "/h"),
            ("HF_ENDPOINT", "http://mirror/"),
            ("HF_TOKEN", "hf_x"),
            ("HF_HUB_OFFLINE", "1"),
        ]));
        assert_eq!(explicit.cache_dir, PathBuf::from("/c"));
        assert_eq!(explicit.endpoint, "http://mirror");
        assert_eq!(explicit.token.as_deref(), Some("hf_x"));
        assert!(explicit.offline);
        const TRUTHY: [&[(&str, &str)]; 3] = [
            &[("HF_HUB_OFFLINE", "True")],
            &[("HF_HUB_OFFLINE", "yes")],
            &[("HF_HUB_OFFLINE", "ON")],
        ];
        for pairs in TRUTHY {
            assert!(HubOptions::from_lookup(env(pairs)).offline, "{pairs:?}");
        }
        assert!(!HubOptions::from_lookup(env(&[("HF_HUB_OFFLINE", "0")])).offline);
    }

    #[tokio::test]
    async fn local_files_and_directories_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("tokenizer.json");
        std::fs::write(&file, bpe_json(Style::ByteLevel, 400)).expect("write");
        let hub = HubOptions::from_lookup(|_| None);
        let by_file = load_tokenizer(file.to_str().expect("utf-8"), &hub)
            .await
            .expect("file");
        let by_dir = load_tokenizer(dir.path().to_str().expect("utf-8"), &hub)
            .await
            .expect("dir");
        assert_eq!(
            by_file.encode("the lazy dog").expect("encode"),
            by_dir.encode("the lazy dog").expect("encode")
        );
        assert!(
            load_tokenizer(BUILTIN, &hub)
                .await
                .expect("builtin")
                .is_builtin()
        );

        let empty = tempfile::tempdir().expect("tempdir");
        let err = load_tokenizer(empty.path().to_str().expect("utf-8"), &hub)
            .await
            .unwrap_err();
        assert!(
            matches!(err, TokenizerError::NoTokenizerJson { .. }),
            "{err}"
        );
        std::fs::write(dir.path().join("bad.json"), b"{not json").expect("write");
        let err = load_tokenizer(dir.path().join("bad.json").to_str().expect("utf-8"), &hub)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("bad.json"), "{err}");
        let err = load_tokenizer("missing/tokenizer.json", &hub)
            .await
            .unwrap_err();
        assert!(matches!(err, TokenizerError::Read { .. }), "{err}");
        let err = load_tokenizer("not/a/repo/id", &hub).await.unwrap_err();
        assert!(matches!(err, TokenizerError::Unrecognised { .. }), "{err}");
    }

    type Request = (String, Option<String>);

    /// A fake hub: serves one repo's tokenizer.json, answers 401 for a gated repo and 404 otherwise, and
    /// records the requests it saw.
    #[derive(Clone, Default)]
    struct FakeHub {
        body: Arc<Vec<u8>>,
        /// `(org/name@revision, Authorization header)` of every request.
        seen: Arc<Mutex<Vec<Request>>>,
    }

    async fn resolve(
        State(hub): State<FakeHub>,
        UrlPath((org, name, revision)): UrlPath<(String, String, String)>,
        headers: HeaderMap,
    ) -> impl IntoResponse {
        let auth = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        hub.seen
            .lock()
            .expect("lock")
            .push((format!("{org}/{name}@{revision}"), auth));
        match (org.as_str(), name.as_str()) {
            ("org", "model") => (
                StatusCode::OK,
                [("x-repo-commit", "abc123")],
                hub.body.to_vec(),
            )
                .into_response(),
            ("org", "gated") => StatusCode::UNAUTHORIZED.into_response(),
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }

    async fn start_fake_hub(body: Vec<u8>) -> (String, FakeHub) {
        let hub = FakeHub {
            body: Arc::new(body),
            ..FakeHub::default()
        };
        let app = Router::new()
            .route(
                "/{org}/{name}/resolve/{revision}/tokenizer.json",
                get(resolve),
            )
            .with_state(hub.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), hub)
    }

    fn hub_options(endpoint: &str, cache: &Path, token: Option<&str>) -> HubOptions {
        HubOptions {
            endpoint: endpoint.to_owned(),
            token: token.map(str::to_owned),
            cache_dir: cache.to_owned(),
            revision: "main".to_owned(),
            offline: false,
        }
    }

    #[tokio::test]
    async fn hub_download_sends_the_token_and_the_cache_is_reused() {
        let (endpoint, hub) = start_fake_hub(bpe_json(Style::ByteLevel, 400)).await;
        let cache = tempfile::tempdir().expect("tempdir");
        let options = hub_options(&endpoint, cache.path(), Some("hf_secret"));
        let first = load_tokenizer("org/model", &options)
            .await
            .expect("download");
        assert_eq!(first.name(), "org/model");
        assert_eq!(
            hub.seen.lock().expect("lock").clone(),
            vec![(
                "org/model@main".to_owned(),
                Some("Bearer hf_secret".to_owned())
            )]
        );
        let snapshot = cache
            .path()
            .join("models--org--model/snapshots/abc123/tokenizer.json");
        assert!(snapshot.is_file(), "cached in the huggingface_hub layout");
        assert_eq!(
            std::fs::read_to_string(cache.path().join("models--org--model/refs/main"))
                .expect("ref"),
            "abc123"
        );

        // Second load: from the cache, even offline and with the endpoint gone.
        let offline = HubOptions {
            endpoint: "http://127.0.0.1:9".to_owned(),
            offline: true,
            ..options
        };
        let second = load_tokenizer("org/model", &offline).await.expect("cached");
        assert_eq!(hub.seen.lock().expect("lock").len(), 1, "no second request");
        assert_eq!(
            first.encode("quick brown fox").expect("a"),
            second.encode("quick brown fox").expect("b")
        );
    }

    #[tokio::test]
    async fn hub_refusals_say_what_to_do() {
        let (endpoint, hub) = start_fake_hub(Vec::new()).await;
        let cache = tempfile::tempdir().expect("tempdir");
        let err = load_tokenizer("org/gated", &hub_options(&endpoint, cache.path(), None))
            .await
            .unwrap_err();
        assert!(
            matches!(err, TokenizerError::HubUnauthorized { status: 401, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("set HF_TOKEN"), "{err}");
        assert_eq!(
            hub.seen.lock().expect("lock")[0].1,
            None,
            "no token, no header"
        );

        let err = load_tokenizer("org/missing", &hub_options(&endpoint, cache.path(), None))
            .await
            .unwrap_err();
        assert!(matches!(err, TokenizerError::HubNotFound { .. }), "{err}");
        assert!(err.to_string().contains("org/missing"), "{err}");

        let offline = HubOptions {
            offline: true,
            ..hub_options(&endpoint, cache.path(), None)
        };
        let err = load_tokenizer("org/other", &offline).await.unwrap_err();
        assert!(matches!(err, TokenizerError::Offline { .. }), "{err}");
    }

    #[test]
    fn added_special_tokens_are_what_the_post_processor_puts_around_a_text() {
        let bos = super::testing::bos_bpe();
        assert_eq!(
            bos.added_special_tokens().expect("counted"),
            AddedSpecialTokens {
                leading: 1,
                total: 1
            }
        );
        // `encode` and `count` stay the text's own tokens: the BOS (id 0) is never among them.
        let own = bos.encode("hello world").expect("encode");
        assert!(!own.is_empty() && !own.contains(&0), "{own:?}");
        for none in [Tokenizer::builtin(), bpe(Style::ByteLevel)] {
            assert_eq!(
                none.added_special_tokens().expect("counted"),
                AddedSpecialTokens::default(),
                "{}",
                none.name()
            );
        }
        // A template with an EOS after the text too (T5-like): one leading, two in all.
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(super::testing::BOS_BPE).expect("fixture"))
                .expect("json");
        json["post_processor"]["single"] = serde_json::json!([
            {"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "<|eos|>", "type_id": 0}}
        ]);
        json["post_processor"]["special_tokens"]["<|eos|>"] =
            serde_json::json!({"id": "<|eos|>", "ids": [1], "tokens": ["<|eos|>"]});
        let both =
            Tokenizer::from_json_bytes("bos-eos", json.to_string().as_bytes()).expect("loads");
        assert_eq!(
            both.added_special_tokens().expect("counted"),
            AddedSpecialTokens {
                leading: 1,
                total: 2
            }
        );
    }
}
