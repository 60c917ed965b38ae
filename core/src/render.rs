//! The profile renderer: a `yaml.in` workload template, the run's values and its overrides in; the exact YAML
//! a run uses out. The operator and `llmbench render` both call [`render_profile`], so a profile renders the same
//! on a laptop and in the cluster. Pure: no I/O, no Kubernetes types.
//!
//! Substitution is YAML-aware. The template is parsed as it stands (a `REPLACE_ENV_NAME` token is a plain word to
//! YAML), and every scalar that holds a token is re-emitted whole: a value that is safe as a plain scalar is
//! inserted as it is, so `16384` stays a number where the template expects one; anything else (a `: `, a ` #`, a
//! leading `*`, a line break, …) is emitted double-quoted, so a value can never change the document's shape.
//! Tokens in block scalars keep the block's indentation; tokens in comments are replaced on one line.
//!
//! Unlike llm-d-benchmark's renderer, an unresolved token is an error (listing every name and line), never text
//! left in the output; an override key that matches nothing is an error too, never a silent no-op. That includes
//! the last key of a dotted path: llm-d-benchmark creates a missing leaf, so `load.stages.0.rat=5` would add a key
//! the harness ignores and the run would go at the profile's own rate. A key is created only when the override says
//! so ([`Override::parse_add`]: `--override-add`, a BenchmarkRun's `spec.overrideAdd`), or when the caller asks for
//! upstream's behaviour ([`RenderOptions::create_missing_leaves`], `--lenient`) and reports what was created.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::Value;

/// The prefix of an llm-d-benchmark placeholder token.
pub const TOKEN_PREFIX: &str = "REPLACE_ENV_";

/// Placeholder names that a run fills from its `stack` and `storage` (DESIGN.md); a run's `env` adds any other.
pub mod well_known {
    /// The served model name.
    pub const MODEL: &str = "LLMDBENCH_DEPLOY_CURRENT_MODEL";
    /// The tokenizer (defaults to the model).
    pub const TOKENIZER: &str = "LLMDBENCH_DEPLOY_CURRENT_TOKENIZER";
    /// The model's maximum context length.
    pub const MAX_MODEL_LEN: &str = "LLMDBENCH_DEPLOY_CURRENT_MAX_MODEL_LEN";
    /// The stack's OpenAI-compatible base URL.
    pub const ENDPOINT_URL: &str = "LLMDBENCH_HARNESS_STACK_ENDPOINT_URL";
    /// The directory of dataset files on the workload volume.
    pub const DATASET_DIR: &str = "LLMDBENCH_RUN_DATASET_DIR";
    /// The dataset file inside [`DATASET_DIR`].
    pub const DATASET_FILE: &str = "LLMDBENCH_RUN_DATASET_FILE";
    /// The workload PVC's name.
    pub const PVC_NAME: &str = "LLMDBENCH_HARNESS_PVC_NAME";
    /// Every well-known name.
    pub const ALL: [&str; 7] = [
        MODEL,
        TOKENIZER,
        MAX_MODEL_LEN,
        ENDPOINT_URL,
        DATASET_DIR,
        DATASET_FILE,
        PVC_NAME,
    ];
}

/// Errors of the renderer; each names the template and, where there is one, the line and the token or key.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RenderError {
    #[error("{template}: line {line}, column {column}: the template is not valid YAML: {message}")]
    TemplateSyntax {
        template: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{template}: {} unresolved placeholder(s): {}", .placeholders.len(), list(.placeholders))]
    UnresolvedPlaceholders {
        template: String,
        placeholders: Vec<UnresolvedPlaceholder>,
    },
    #[error("{template}: {} override(s) match nothing: {}", .misses.len(), list(.misses))]
    UnmatchedOverrides {
        template: String,
        misses: Vec<OverrideMiss>,
    },
    #[error(
        "{template}: overrides need a YAML mapping at the document root, but the rendered profile is {found}"
    )]
    NotAMapping {
        template: String,
        found: &'static str,
    },
    #[error(
        "{template}: the rendered profile is not valid YAML (line {line}, column {column}: {message}); a value \
         inserted for a placeholder probably broke it"
    )]
    RenderedSyntax {
        template: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{template}: cannot write the rendered profile: {message}")]
    Emit { template: String, message: String },
    #[error(transparent)]
    Override(#[from] OverrideError),
}

/// A placeholder with no value, with every line it appears on.
#[derive(Debug, Clone, PartialEq)]
pub struct UnresolvedPlaceholder {
    /// The name after `REPLACE_ENV_` (or inside `${…}`).
    pub name: String,
    /// 1-based line numbers in the template.
    pub lines: Vec<usize>,
    /// `${NAME}`: a shell-style placeholder, which llm-d-benchmark never substitutes.
    pub shell_style: bool,
    /// The nearest known name, when one is close.
    pub suggestion: Option<String>,
}

impl fmt::Display for UnresolvedPlaceholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines = self
            .lines
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        if self.shell_style {
            write!(
                f,
                "${{{}}} (line {lines}; a shell-style placeholder that no profile renderer substitutes: give it a \
                 value with --set {}=VALUE or fix the template)",
                self.name, self.name
            )?;
        } else {
            write!(f, "{TOKEN_PREFIX}{} (line {lines})", self.name)?;
        }
        if let Some(s) = &self.suggestion {
            write!(f, " — did you mean {s}?")?;
        }
        Ok(())
    }
}

/// An override key that selected nothing, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct OverrideMiss {
    pub key: String,
    pub reason: String,
    pub suggestion: Option<String>,
    /// Only the last key of a dotted path is missing, under a mapping that exists: an add
    /// ([`Override::parse_add`]) would create it.
    pub creatable: bool,
    /// What the key means elsewhere, filled by a caller that knows the profile's dialect (e.g. "`load.stages.0.rate`
    /// is inference-perf's request rate; in a guidellm profile it is `spec.profile.rate`"). Shown instead of the
    /// suggestion.
    pub hint: Option<String>,
}

impl fmt::Display for OverrideMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({})", self.key, self.reason)?;
        if let Some(hint) = &self.hint {
            write!(f, " — {hint}")?;
        } else if let Some(s) = &self.suggestion {
            write!(f, " — did you mean `{s}`?")?;
        }
        if self.creatable {
            write!(
                f,
                "; to create `{}`, give it with --override-add (spec.overrideAdd in a BenchmarkRun)",
                self.key
            )?;
        }
        Ok(())
    }
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A malformed `key=value` override.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("malformed override {text:?}: {reason}")]
pub struct OverrideError {
    pub text: String,
    pub reason: String,
}

/// One `key=value` override. A key with dots is a path from the document root (integer segments index lists,
/// negative ones count from the end); a bare key sets every key of exactly that name at any depth. Every key of the
/// path must exist, the last one too, unless the override is an add.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub key: String,
    pub path: Vec<String>,
    pub value: Value,
    /// An add (`--override-add`, `spec.overrideAdd`): the key is a path from the root, bare or dotted, and its last
    /// key is created under a mapping that exists (an existing one is set). Indexes must still exist: an add
    /// never appends to a list.
    pub create: bool,
}

impl Override {
    /// Parses `key=value`: the key ends at the first `=`; both sides are trimmed; the value is typed like a YAML
    /// scalar (see [`type_scalar`]).
    pub fn parse(text: &str) -> Result<Self, OverrideError> {
        Self::parse_text(text, false)
    }

    /// Parses `key=value` as an add: the key is a path from the document root whose last key may be missing, and
    /// is then created.
    pub fn parse_add(text: &str) -> Result<Self, OverrideError> {
        Self::parse_text(text, true)
    }

    fn parse_text(text: &str, create: bool) -> Result<Self, OverrideError> {
        let fail = |reason: &str| OverrideError {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (key, raw) = text
            .split_once('=')
            .ok_or_else(|| fail("expected key=value"))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(fail("the key is empty"));
        }
        if key.chars().any(char::is_whitespace) {
            return Err(fail("the key contains whitespace"));
        }
        let path: Vec<String> = key.split('.').map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            return Err(fail(
                "the key has an empty path segment (two dots, or a leading or trailing dot)",
            ));
        }
        let value = type_scalar(raw.trim()).map_err(|reason| fail(&reason))?;
        Ok(Self {
            key: key.to_owned(),
            path,
            value,
            create,
        })
    }

    /// Whether the key is a path from the root rather than a name matched at any depth.
    fn is_path(&self) -> bool {
        self.create || self.path.len() > 1
    }
}

/// How [`render_profile_with`] treats overrides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// llm-d-benchmark's rule (`--lenient`): a dotted override whose last key is missing under an existing mapping
    /// creates it, and is reported in [`Rendered::created`], instead of failing the render.
    pub create_missing_leaves: bool,
}

/// A rendered profile, and the overrides that created a key because [`RenderOptions::create_missing_leaves`] was
/// set (each as the miss it would otherwise have been).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub text: String,
    pub created: Vec<OverrideMiss>,
}

/// Types an override value the way a YAML reader types a plain scalar: `null`/`~`/empty → null;
/// `true`/`false`/`yes`/`no` (any case; the last two as YAML 1.1 readers such as PyYAML, and llm-d-benchmark's own
/// override typing, read them) → bool; decimal, `0x` and `0o` integers → int; decimals and exponents → float;
/// anything else → string. Quoting (`"123"`, `'123'`) keeps a string.
pub fn type_scalar(raw: &str) -> Result<Value, String> {
    if let Some(inner) = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .filter(|_| raw.len() >= 2)
    {
        return serde_json::from_str::<String>(&format!("\"{inner}\""))
            .map(Value::String)
            .map_err(|e| format!("bad double-quoted string: {e}"));
    }
    if let Some(inner) = raw
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .filter(|_| raw.len() >= 2)
    {
        return Ok(Value::String(inner.replace("''", "'")));
    }
    match raw.to_ascii_lowercase().as_str() {
        "" | "~" | "null" => return Ok(Value::Null),
        "true" | "yes" => return Ok(Value::Bool(true)),
        "false" | "no" => return Ok(Value::Bool(false)),
        ".inf" | "+.inf" | "-.inf" | ".nan" => {
            return Err(format!(
                "{raw} is an infinite or NaN float, which a profile cannot hold as a number; write `inf` \
                 (a string, as vllm-benchmark's request-rate takes it)"
            ));
        }
        _ => {}
    }
    if let Some(int) = parse_yaml_int(raw) {
        return Ok(Value::from(int));
    }
    if is_yaml_float(raw)
        && let Some(n) = raw
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
    {
        return Ok(Value::Number(n));
    }
    Ok(Value::String(raw.to_owned()))
}

fn parse_yaml_int(raw: &str) -> Option<i64> {
    let (neg, digits) = match raw.as_bytes().first()? {
        b'-' => (true, &raw[1..]),
        b'+' => (false, &raw[1..]),
        _ => (false, raw),
    };
    let magnitude = if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if let Some(oct) = digits.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()?
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse::<i64>().ok()?
    } else {
        return None;
    };
    Some(if neg { -magnitude } else { magnitude })
}

/// YAML 1.2 core schema float: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_yaml_float(raw: &str) -> bool {
    let s = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match frac {
        Some(f) => digits(int_part) && digits(f) && !(int_part.is_empty() && f.is_empty()),
        None => !int_part.is_empty() && digits(int_part),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// Renders `template` (named `template_name` in errors) with placeholder `values` and `overrides`, applied in order.
///
/// Without overrides the output is the template text with its tokens replaced, comments and layout kept. With
/// overrides the document is rewritten in block style (comments are lost, as in llm-d-benchmark).
pub fn render_profile(
    template_name: &str,
    template: &str,
    values: &BTreeMap<String, String>,
    overrides: &[Override],
) -> Result<String, RenderError> {
    render_profile_with(
        template_name,
        template,
        values,
        overrides,
        RenderOptions::default(),
    )
    .map(|rendered| rendered.text)
}

/// [`render_profile`] with `options`, saying which keys were created under them.
pub fn render_profile_with(
    template_name: &str,
    template: &str,
    values: &BTreeMap<String, String>,
    overrides: &[Override],
    options: RenderOptions,
) -> Result<Rendered, RenderError> {
    let substituted = substitute(template_name, template, values)?;
    let document: Value = serde_saphyr::from_str(&substituted).map_err(|e| {
        let (line, column) = error_position(&e.to_string());
        // Without placeholders the text that failed is the template itself (too deep, an alias bomb, a
        // duplicate anchor...): blaming an inserted value would send the user looking in the wrong place.
        if find_tokens(template).is_empty() {
            RenderError::TemplateSyntax {
                template: template_name.to_owned(),
                line,
                column,
                message: e.to_string(),
            }
        } else {
            RenderError::RenderedSyntax {
                template: template_name.to_owned(),
                line,
                column,
                message: e.to_string(),
            }
        }
    })?;
    if overrides.is_empty() {
        return Ok(Rendered {
            text: substituted,
            created: Vec::new(),
        });
    }
    let mut document = document;
    let created = apply_overrides_with(template_name, &mut document, overrides, options)?;
    let text = serde_saphyr::to_string(&document).map_err(|e| RenderError::Emit {
        template: template_name.to_owned(),
        message: e.to_string(),
    })?;
    Ok(Rendered { text, created })
}

/// Every placeholder name the template uses, in order of first appearance (`REPLACE_ENV_` names and `${…}` names).
pub fn placeholders(template: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for token in find_tokens(template) {
        if !names.iter().any(|n| *n == token.name) {
            names.push(token.name.to_owned());
        }
    }
    names
}

#[derive(Debug)]
struct Token<'t> {
    /// Byte range of the whole token (`REPLACE_ENV_NAME` or `${NAME}`).
    range: Range<usize>,
    name: &'t str,
    shell_style: bool,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Finds `REPLACE_ENV_(\w+)` tokens (greedy, like llm-d-benchmark: a letter, digit or `_` right after a name
/// makes it another name) and shell-style `${NAME}` placeholders.
fn find_tokens(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(TOKEN_PREFIX.as_bytes()) {
            let start_name = i + TOKEN_PREFIX.len();
            let mut end = start_name;
            while end < bytes.len() && is_word_byte(bytes[end]) {
                end += 1;
            }
            if end > start_name {
                tokens.push(Token {
                    range: i..end,
                    name: &text[start_name..end],
                    shell_style: false,
                });
                i = end;
                continue;
            }
        } else if bytes[i] == b'$' && bytes.get(i + 1) == Some(&b'{') {
            let start_name = i + 2;
            let mut end = start_name;
            while end < bytes.len() && is_word_byte(bytes[end]) {
                end += 1;
            }
            let starts_like_name = bytes
                .get(start_name)
                .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
            if starts_like_name && bytes.get(end) == Some(&b'}') {
                tokens.push(Token {
                    range: i..end + 1,
                    name: &text[start_name..end],
                    shell_style: true,
                });
                i = end + 1;
                continue;
            }
        }
        i += 1;
    }
    tokens
}

fn line_of(text: &str, byte: usize) -> usize {
    text.as_bytes()[..byte]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn substitute(
    template_name: &str,
    template: &str,
    values: &BTreeMap<String, String>,
) -> Result<String, RenderError> {
    let tokens = find_tokens(template);
    check_resolved(template_name, template, &tokens, values)?;
    if tokens.is_empty() {
        return Ok(template.to_owned());
    }
    let value_of = |name: &str| values.get(name).map(String::as_str).unwrap_or_default();

    // Scalars that hold a token, with their style and decoded value, from the template's own parse.
    let char_to_byte: Vec<usize> = template
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(template.len()))
        .collect();
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for event in Parser::new_from_str(template) {
        let (event, span) = event.map_err(|e| RenderError::TemplateSyntax {
            template: template_name.to_owned(),
            line: e.marker().line(),
            column: e.marker().col() + 1,
            message: e.info().to_owned(),
        })?;
        let Event::Scalar(decoded, style, _, _) = event else {
            continue;
        };
        let (Some(&start), Some(&end)) = (
            char_to_byte.get(span.start.index()),
            char_to_byte.get(span.end.index()),
        ) else {
            continue;
        };
        let source = &template[start..end];
        if !tokens
            .iter()
            .any(|t| start <= t.range.start && t.range.end <= end)
        {
            continue;
        }
        let replacement = match style {
            ScalarStyle::Plain => {
                let value = replace_tokens(&decoded, &value_of);
                if is_plain_safe(&value) {
                    value
                } else {
                    double_quoted(&value)
                }
            }
            ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => {
                double_quoted(&replace_tokens(&decoded, &value_of))
            }
            ScalarStyle::Literal | ScalarStyle::Folded => {
                replace_in_block(template, start, source, &tokens, &value_of)
            }
        };
        edits.push((start..end, replacement));
    }
    // Tokens outside every scalar sit in comments: replace them on one line.
    for token in &tokens {
        if !edits
            .iter()
            .any(|(r, _)| r.start <= token.range.start && token.range.end <= r.end)
        {
            let flat = value_of(token.name).replace(['\n', '\r'], " ");
            edits.push((token.range.clone(), flat));
        }
    }
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(template.len() + 256);
    let mut at = 0;
    for (range, text) in edits {
        out.push_str(&template[at..range.start]);
        out.push_str(&text);
        at = range.end;
    }
    out.push_str(&template[at..]);
    Ok(out)
}

fn check_resolved(
    template_name: &str,
    template: &str,
    tokens: &[Token<'_>],
    values: &BTreeMap<String, String>,
) -> Result<(), RenderError> {
    let mut missing: Vec<UnresolvedPlaceholder> = Vec::new();
    for token in tokens.iter().filter(|t| !values.contains_key(t.name)) {
        let line = line_of(template, token.range.start);
        match missing
            .iter_mut()
            .find(|m| m.name == token.name && m.shell_style == token.shell_style)
        {
            Some(m) if m.lines.last() != Some(&line) => m.lines.push(line),
            Some(_) => {}
            None => missing.push(UnresolvedPlaceholder {
                name: token.name.to_owned(),
                lines: vec![line],
                shell_style: token.shell_style,
                suggestion: nearest(token.name, values.keys().map(String::as_str)).map(|s| {
                    if token.shell_style {
                        s.to_owned()
                    } else {
                        format!("{TOKEN_PREFIX}{s}")
                    }
                }),
            }),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(RenderError::UnresolvedPlaceholders {
            template: template_name.to_owned(),
            placeholders: missing,
        })
    }
}

/// Replaces every token in a decoded scalar value.
fn replace_tokens<'v>(text: &str, value_of: &impl Fn(&str) -> &'v str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for token in find_tokens(text) {
        out.push_str(&text[at..token.range.start]);
        out.push_str(value_of(token.name));
        at = token.range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Replaces tokens inside a literal or folded block, continuing each line break of a value at the indentation of
/// the line the token is on, so the block stays one block.
fn replace_in_block<'v>(
    template: &str,
    start: usize,
    source: &str,
    tokens: &[Token<'_>],
    value_of: &impl Fn(&str) -> &'v str,
) -> String {
    let mut out = String::with_capacity(source.len());
    let mut at = 0;
    for token in tokens
        .iter()
        .filter(|t| start <= t.range.start && t.range.end <= start + source.len())
    {
        let local = token.range.start - start;
        out.push_str(&source[at..local]);
        let line_start = template[..token.range.start]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let indent: String = template[line_start..]
            .chars()
            .take_while(|c| *c == ' ')
            .collect();
        out.push_str(&value_of(token.name).replace('\n', &format!("\n{indent}")));
        at = token.range.end - start;
    }
    out.push_str(&source[at..]);
    out
}

/// Whether `value` reads back as the same text when written as a plain scalar in any context (block or flow):
/// no indicator at the start, no `: ` or ` #`, no flow punctuation, no line breaks or edge whitespace.
fn is_plain_safe(value: &str) -> bool {
    let Some(first) = value.chars().next() else {
        return false;
    };
    if value.trim() != value || value.contains(['\n', '\r', '\t']) {
        return false;
    }
    if value.contains(": ") || value.contains(" #") || value.ends_with(':') {
        return false;
    }
    if value.contains([',', '[', ']', '{', '}']) {
        return false;
    }
    if "?:#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if first == '-' && value.chars().nth(1).is_none_or(|c| c == ' ' || c == '-') {
        return false;
    }
    true
}

fn double_quoted(value: &str) -> String {
    // A JSON string is a valid YAML double-quoted scalar with the same value.
    serde_json::Value::String(value.to_owned()).to_string()
}

fn error_position(message: &str) -> (usize, usize) {
    // serde-saphyr reports "... at line L column C"; take the numbers when present.
    let number_after = |word: &str| {
        message.find(word).and_then(|i| {
            message[i + word.len()..]
                .trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
    };
    (
        number_after("line").unwrap_or(0),
        number_after("column").unwrap_or(0),
    )
}

/// Applies overrides to a parsed document, in order, with `options`. Every key that selects nothing is reported,
/// all at once. Returns the overrides that created a key because of them.
pub(crate) fn apply_overrides_with(
    template_name: &str,
    document: &mut Value,
    overrides: &[Override],
    options: RenderOptions,
) -> Result<Vec<OverrideMiss>, RenderError> {
    let found = match document {
        Value::Object(_) => None,
        Value::Null => Some("empty"),
        Value::Array(_) => Some("a list"),
        _ => Some("a scalar"),
    };
    if let Some(found) = found {
        return Err(RenderError::NotAMapping {
            template: template_name.to_owned(),
            found,
        });
    }
    let mut misses = Vec::new();
    let mut created = Vec::new();
    for o in overrides {
        let result = if o.is_path() {
            set_path(document, &o.path, &o.value, o.create)
        } else {
            set_everywhere(document, &o.key, &o.value)
        };
        let Err(miss) = result else {
            continue;
        };
        let miss = OverrideMiss {
            key: o.key.clone(),
            reason: miss.reason,
            suggestion: miss.suggestion,
            creatable: miss.creatable,
            hint: None,
        };
        if miss.creatable
            && options.create_missing_leaves
            && set_path(document, &o.path, &o.value, true).is_ok()
        {
            created.push(miss);
        } else {
            misses.push(miss);
        }
    }
    if misses.is_empty() {
        Ok(created)
    } else {
        Err(RenderError::UnmatchedOverrides {
            template: template_name.to_owned(),
            misses,
        })
    }
}

/// Why an override selected nothing.
struct Miss {
    reason: String,
    suggestion: Option<String>,
    /// Only the last key is missing, under a mapping.
    creatable: bool,
}

impl Miss {
    fn new(reason: String, suggestion: Option<String>) -> Self {
        Self {
            reason,
            suggestion,
            creatable: false,
        }
    }
}

/// Sets the value at `path`; with `create`, a missing last key under a mapping is created.
fn set_path(
    document: &mut Value,
    path: &[String],
    value: &Value,
    create: bool,
) -> Result<(), Miss> {
    let mut node = document;
    for (depth, segment) in path.iter().enumerate() {
        let last = depth + 1 == path.len();
        let parent = if depth == 0 {
            "the document root".to_owned()
        } else {
            format!("`{}`", path[..depth].join("."))
        };
        node = match node {
            Value::Object(map) => {
                if !map.contains_key(segment) {
                    if last && create {
                        map.insert(segment.clone(), value.clone());
                        return Ok(());
                    }
                    let suggestion = nearest(segment, map.keys().map(String::as_str)).map(|s| {
                        let mut p = path[..depth].to_vec();
                        p.push(s.to_owned());
                        p.extend_from_slice(&path[depth + 1..]);
                        p.join(".")
                    });
                    return Err(Miss {
                        reason: format!("{parent} has no key `{segment}`"),
                        suggestion,
                        creatable: last,
                    });
                }
                let slot = map
                    .get_mut(segment.as_str())
                    .ok_or_else(|| Miss::new(format!("{parent} has no key `{segment}`"), None))?;
                if last {
                    *slot = value.clone();
                    return Ok(());
                }
                slot
            }
            Value::Array(items) => {
                let len = items.len();
                let index: i64 = segment.parse().map_err(|_| {
                    Miss::new(
                        format!("{parent} is a list, and `{segment}` is not an index"),
                        None,
                    )
                })?;
                let resolved = if index < 0 { index + len as i64 } else { index };
                if resolved < 0 || resolved >= len as i64 {
                    return Err(Miss::new(
                        format!("{parent} has {len} item(s), so index {index} is out of range"),
                        None,
                    ));
                }
                let slot = &mut items[resolved as usize];
                if last {
                    *slot = value.clone();
                    return Ok(());
                }
                slot
            }
            _ => {
                return Err(Miss::new(
                    format!("{parent} is a scalar, not a mapping or list"),
                    None,
                ));
            }
        };
    }
    Ok(())
}

fn set_everywhere(document: &mut Value, key: &str, value: &Value) -> Result<(), Miss> {
    fn walk(node: &mut Value, key: &str, value: &Value) -> usize {
        match node {
            Value::Object(map) => map
                .iter_mut()
                .map(|(k, v)| {
                    if k == key {
                        *v = value.clone();
                        1
                    } else {
                        walk(v, key, value)
                    }
                })
                .sum(),
            Value::Array(items) => items.iter_mut().map(|v| walk(v, key, value)).sum(),
            _ => 0,
        }
    }
    if walk(document, key, value) > 0 {
        return Ok(());
    }
    let mut keys = Vec::new();
    collect_keys(document, &mut keys);
    Err(Miss::new(
        "no key of exactly that name at any depth".to_owned(),
        nearest(key, keys.iter().map(String::as_str)).map(str::to_owned),
    ))
}

fn collect_keys(node: &Value, keys: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            for (k, v) in map {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
                collect_keys(v, keys);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_keys(v, keys)),
        _ => {}
    }
}

/// The candidate closest to `name` by edit distance, when it is close enough to be a likely typo.
pub fn nearest<'c>(name: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let limit = (name.chars().count() / 3).clamp(1, 4);
    let lowered = name.to_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .filter_map(|c| Some((edit_distance_within(&lowered, &c.to_lowercase(), limit)?, c)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Names longer than this get no suggestion: nobody misspells a 300-character key, and the distance table grows
/// with the product of the lengths.
const MAX_SUGGESTED_LEN: usize = 256;

/// The optimal-string-alignment distance between `a` and `b` when it is at most `max`, else `None`: insertions,
/// deletions, substitutions and swaps of neighbours each cost 1, so the common typo `modle` is one edit from
/// `model`. Strings whose lengths differ by more than `max` are rejected before any table is built, so a
/// megabyte-long key costs nothing (the table is `len(a) × len(b)`, and an unbounded one would be gigabytes).
pub fn edit_distance_within(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().take(MAX_SUGGESTED_LEN + 1).collect();
    let b: Vec<char> = b.chars().take(MAX_SUGGESTED_LEN + 1).collect();
    if a.len() > MAX_SUGGESTED_LEN || b.len() > MAX_SUGGESTED_LEN || a.len().abs_diff(b.len()) > max
    {
        return None;
    }
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    let distance = d[a.len() * width + b.len()];
    (distance <= max).then_some(distance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn overrides(items: &[&str]) -> Vec<Override> {
        items
            .iter()
            .map(|o| Override::parse(o).expect("test override parses"))
            .collect()
    }

    fn parse(yaml: &str) -> Value {
        serde_saphyr::from_str(yaml).expect("rendered YAML parses")
    }

    const DISTRIBUTIONS: &str = "\
data:
  type: random
  input_distribution:
    min: 10
    max: 100
    total_count: 50
  output_distribution:
    min: 10
    max: 200
    total_count: 50
guidellm:
  prompt_tokens_min: 10
load:
  stages:
  - rate: 1
    duration: 30
";

    #[test]
    fn token_inside_a_string_and_beside_slashes_dots_dashes_and_quotes_is_replaced() {
        let template = "path: REPLACE_ENV_DIR/REPLACE_ENV_FILE\nhost: REPLACE_ENV_A.svc-REPLACE_ENV_B\n\
                        filter: \"lambda x: x['max_tokens'] < REPLACE_ENV_LEN\"\nq: 'REPLACE_ENV_A'\n";
        let v = values(&[
            ("DIR", "/requests/datasets"),
            ("FILE", "d.json"),
            ("A", "svc"),
            ("B", "1"),
            ("LEN", "16384"),
        ]);
        let out = render_profile("t.yaml.in", template, &v, &[]).expect("renders");
        let doc = parse(&out);
        assert_eq!(doc["path"], "/requests/datasets/d.json");
        assert_eq!(doc["host"], "svc.svc-1");
        assert_eq!(doc["filter"], "lambda x: x['max_tokens'] < 16384");
        assert_eq!(doc["q"], "svc");
        assert!(!out.contains(TOKEN_PREFIX));
    }

    #[test]
    fn a_number_stays_a_number_where_the_template_expects_one() {
        let out = render_profile(
            "t",
            "len: REPLACE_ENV_LEN\n",
            &values(&[("LEN", "16384")]),
            &[],
        )
        .expect("renders");
        assert_eq!(parse(&out)["len"], Value::from(16384));
    }

    #[test]
    fn a_quoted_token_stays_a_string_even_when_the_value_looks_like_a_number() {
        let out = render_profile(
            "t",
            "name: \"REPLACE_ENV_M\"\n",
            &values(&[("M", "123")]),
            &[],
        )
        .expect("renders");
        assert_eq!(parse(&out)["name"], "123");
    }

    #[test]
    fn values_that_would_break_yaml_are_inserted_as_quoted_strings() {
        for hostile in [
            "a: b",
            "x # not a comment",
            "*alias",
            "two\nlines",
            "[1, 2]",
            "- item",
            "",
            " padded ",
        ] {
            let template = "model: REPLACE_ENV_M\nnext: 1\n";
            let out =
                render_profile("t", template, &values(&[("M", hostile)]), &[]).expect("renders");
            let doc = parse(&out);
            assert_eq!(
                doc["model"], hostile,
                "value {hostile:?} survives as a string"
            );
            assert_eq!(
                doc["next"], 1,
                "value {hostile:?} does not change the document's shape"
            );
        }
    }

    #[test]
    fn a_line_break_in_a_block_scalar_keeps_the_block_indentation() {
        let template = "prompt: |\n  first REPLACE_ENV_P\n  last\nafter: 1\n";
        let out =
            render_profile("t", template, &values(&[("P", "one\ntwo")]), &[]).expect("renders");
        let doc = parse(&out);
        assert_eq!(doc["prompt"], "first one\ntwo\nlast\n");
        assert_eq!(doc["after"], 1);
    }

    #[test]
    fn tokens_in_comments_are_replaced_on_one_line() {
        let template = "# endpoint REPLACE_ENV_E\na: 1 # REPLACE_ENV_E\n";
        let out = render_profile("t", template, &values(&[("E", "x\ny")]), &[]).expect("renders");
        assert_eq!(out, "# endpoint x y\na: 1 # x y\n");
    }

    #[test]
    fn every_unresolved_token_is_listed_with_its_lines_and_a_suggestion() {
        let template = "a: REPLACE_ENV_MODLE\nb: REPLACE_ENV_OTHER\nc: REPLACE_ENV_MODLE\n";
        let err = render_profile("p.yaml.in", template, &values(&[("MODEL", "m")]), &[])
            .expect_err("unresolved");
        let RenderError::UnresolvedPlaceholders {
            template,
            placeholders,
        } = &err
        else {
            panic!("unexpected error {err}");
        };
        assert_eq!(template, "p.yaml.in");
        assert_eq!(placeholders.len(), 2);
        assert_eq!(placeholders[0].name, "MODLE");
        assert_eq!(placeholders[0].lines, vec![1, 3]);
        assert_eq!(
            placeholders[0].suggestion.as_deref(),
            Some("REPLACE_ENV_MODEL")
        );
        assert_eq!(placeholders[1].lines, vec![2]);
        let message = err.to_string();
        assert!(message.contains("p.yaml.in"), "{message}");
        assert!(
            message.contains("REPLACE_ENV_MODLE (line 1, 3) — did you mean REPLACE_ENV_MODEL?"),
            "{message}"
        );
    }

    #[test]
    fn a_letter_right_after_a_token_makes_it_another_name() {
        let err = render_profile(
            "t",
            "a: REPLACE_ENV_MODELx\n",
            &values(&[("MODEL", "m")]),
            &[],
        )
        .expect_err("greedy");
        assert!(err.to_string().contains("REPLACE_ENV_MODELx"), "{err}");
    }

    #[test]
    fn shell_style_placeholders_are_errors_unless_given_a_value() {
        let template = "seed: ${CONCURRENCY}   # per level\n";
        let err = render_profile("t", template, &BTreeMap::new(), &[]).expect_err("unresolved");
        assert!(
            err.to_string()
                .contains("${CONCURRENCY} (line 1; a shell-style placeholder"),
            "{err}"
        );
        let out =
            render_profile("t", template, &values(&[("CONCURRENCY", "8")]), &[]).expect("renders");
        assert_eq!(parse(&out)["seed"], 8);
    }

    #[test]
    fn a_template_that_is_not_yaml_names_the_line() {
        let err = render_profile(
            "bad.yaml.in",
            "a: REPLACE_ENV_X\n b: [\n",
            &values(&[("X", "1")]),
            &[],
        )
        .expect_err("syntax");
        assert!(
            matches!(err, RenderError::TemplateSyntax { line: 2, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn bare_override_key_sets_every_key_of_that_name_but_never_a_suffix_match() {
        let out = render_profile(
            "t",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["min=20"]),
        )
        .expect("renders");
        let doc = parse(&out);
        assert_eq!(doc["data"]["input_distribution"]["min"], 20);
        assert_eq!(doc["data"]["output_distribution"]["min"], 20);
        assert_eq!(doc["guidellm"]["prompt_tokens_min"], 10);
    }

    #[test]
    fn dotted_override_is_a_path_from_the_root_with_list_indexes() {
        let out = render_profile(
            "t",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["load.stages.0.rate=5", "load.stages.-1.duration=60"]),
        )
        .expect("renders");
        let doc = parse(&out);
        assert_eq!(doc["load"]["stages"][0]["rate"], 5);
        assert_eq!(doc["load"]["stages"][0]["duration"], 60);
    }

    #[test]
    fn override_index_past_the_end_of_a_list_is_an_error() {
        let err = render_profile(
            "p.yaml.in",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["load.stages.1.rate=7"]),
        )
        .expect_err("out of range");
        let message = err.to_string();
        assert!(message.contains("p.yaml.in"), "{message}");
        assert!(
            message.contains(
                "`load.stages.1.rate` (`load.stages` has 1 item(s), so index 1 is out of range)"
            ),
            "{message}"
        );
    }

    #[test]
    fn override_values_are_typed_like_yaml_scalars_and_quoting_keeps_a_string() {
        let template = "server:\n  model_name: m\n  flag: 0\n  f: 0\n  n: 0\n  s: 0\ndata:\n  total_count: 1\n";
        let out = render_profile(
            "t",
            template,
            &BTreeMap::new(),
            &overrides(&[
                "total_count=200",
                "model_name=\"123\"",
                "server.flag=true",
                "server.f=0.5",
                "server.n=null",
                "server.s=abc",
            ]),
        )
        .expect("renders");
        let doc = parse(&out);
        assert_eq!(doc["data"]["total_count"], Value::from(200));
        assert!(doc["data"]["total_count"].is_i64());
        assert_eq!(doc["server"]["model_name"], Value::String("123".to_owned()));
        assert_eq!(doc["server"]["flag"], true);
        assert_eq!(doc["server"]["f"], 0.5);
        assert_eq!(doc["server"]["n"], Value::Null);
        assert_eq!(doc["server"]["s"], "abc");
    }

    #[test]
    fn dotted_override_whose_last_key_is_missing_is_an_error_naming_the_nearest_key_and_the_add() {
        let err = render_profile(
            "p.yaml.in",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["load.stages.0.rat=5"]),
        )
        .expect_err("a typo in the last key creates nothing");
        let RenderError::UnmatchedOverrides { misses, .. } = &err else {
            panic!("unexpected {err}");
        };
        assert!(misses[0].creatable);
        assert_eq!(misses[0].suggestion.as_deref(), Some("load.stages.0.rate"));
        assert_eq!(
            err.to_string(),
            "p.yaml.in: 1 override(s) match nothing: `load.stages.0.rat` (`load.stages.0` has no key `rat`) — did \
             you mean `load.stages.0.rate`?; to create `load.stages.0.rat`, give it with --override-add \
             (spec.overrideAdd in a BenchmarkRun)"
        );
    }

    #[test]
    fn an_add_creates_a_missing_last_key_and_sets_an_existing_one() {
        let adds = [
            "data.input_distribution.std_dev=30",
            "data.type=shared_prefix",
        ]
        .map(|o| Override::parse_add(o).expect("parses"));
        let out = render_profile("t", DISTRIBUTIONS, &BTreeMap::new(), &adds).expect("renders");
        let doc = parse(&out);
        assert_eq!(doc["data"]["input_distribution"]["std_dev"], 30);
        assert_eq!(doc["data"]["type"], "shared_prefix");
    }

    #[test]
    fn an_add_with_a_bare_key_creates_it_at_the_root_only() {
        let add = Override::parse_add("min=1").expect("parses");
        let out = render_profile("t", DISTRIBUTIONS, &BTreeMap::new(), &[add]).expect("renders");
        let doc = parse(&out);
        assert_eq!(doc["min"], 1);
        assert_eq!(
            doc["data"]["input_distribution"]["min"], 10,
            "an add is a path, never a name matched at any depth"
        );
    }

    #[test]
    fn an_add_never_creates_a_parent_or_appends_to_a_list() {
        for (add, reason) in [
            ("data.nope.x=1", "`data` has no key `nope`"),
            ("load.stages.1.rate=1", "index 1 is out of range"),
            ("data.type.x=1", "`data.type` is a scalar"),
        ] {
            let err = render_profile(
                "t",
                DISTRIBUTIONS,
                &BTreeMap::new(),
                &[Override::parse_add(add).expect("parses")],
            )
            .expect_err(add);
            assert!(err.to_string().contains(reason), "{add}: {err}");
        }
    }

    #[test]
    fn an_override_may_set_a_key_an_earlier_add_created() {
        let edits = vec![
            Override::parse_add("load.stages.0.concurrency_level=1").expect("parses"),
            Override::parse("load.stages.0.concurrency_level=8").expect("parses"),
        ];
        let out = render_profile("t", DISTRIBUTIONS, &BTreeMap::new(), &edits).expect("renders");
        assert_eq!(parse(&out)["load"]["stages"][0]["concurrency_level"], 8);
    }

    #[test]
    fn creating_missing_leaves_on_request_reports_each_created_key_and_still_refuses_missing_parents()
     {
        let options = RenderOptions {
            create_missing_leaves: true,
        };
        let rendered = render_profile_with(
            "t",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["load.stages.0.rat=5", "load.stages.0.rate=2"]),
            options,
        )
        .expect("renders");
        let doc = parse(&rendered.text);
        assert_eq!(doc["load"]["stages"][0]["rat"], 5);
        assert_eq!(doc["load"]["stages"][0]["rate"], 2);
        assert_eq!(rendered.created.len(), 1);
        assert_eq!(rendered.created[0].key, "load.stages.0.rat");
        assert_eq!(
            rendered.created[0].suggestion.as_deref(),
            Some("load.stages.0.rate")
        );
        let err = render_profile_with(
            "t",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["lod.stages.0.rate=5"]),
            options,
        )
        .expect_err("a missing parent is never created");
        assert!(
            err.to_string()
                .contains("did you mean `load.stages.0.rate`"),
            "{err}"
        );
    }

    #[test]
    fn override_with_a_missing_parent_is_an_error_with_the_nearest_key() {
        let err = render_profile(
            "t",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["data.input_distributon.min=1"]),
        )
        .expect_err("missing parent");
        let message = err.to_string();
        assert!(
            message.contains("`data` has no key `input_distributon`"),
            "{message}"
        );
        assert!(
            message.contains("did you mean `data.input_distribution.min`?"),
            "{message}"
        );
    }

    #[test]
    fn bare_override_that_matches_nothing_is_an_error_naming_it() {
        let err = render_profile(
            "t",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["total_cont=5", "nothing=1"]),
        )
        .expect_err("unmatched");
        let RenderError::UnmatchedOverrides { misses, .. } = &err else {
            panic!("unexpected {err}");
        };
        assert_eq!(misses.len(), 2, "every miss is reported at once");
        assert_eq!(misses[0].suggestion.as_deref(), Some("total_count"));
        assert!(
            err.to_string()
                .contains("`nothing` (no key of exactly that name at any depth)"),
            "{err}"
        );
    }

    #[test]
    fn override_through_a_scalar_is_an_error() {
        let err = render_profile(
            "t",
            DISTRIBUTIONS,
            &BTreeMap::new(),
            &overrides(&["data.type.x=1"]),
        )
        .expect_err("scalar parent");
        assert!(err.to_string().contains("`data.type` is a scalar"), "{err}");
    }

    #[test]
    fn malformed_overrides_are_rejected_when_parsed() {
        for bad in ["novalue", "=5", "a..b=1", ".a=1", "a.=1", "a b=1"] {
            assert!(Override::parse(bad).is_err(), "{bad} is rejected");
        }
        assert!(
            Override::parse("x=.inf")
                .expect_err("inf")
                .reason
                .contains("write `inf`")
        );
        assert_eq!(
            Override::parse("request-rate=inf").expect("parses").value,
            "inf"
        );
        assert_eq!(Override::parse("a=b=c").expect("parses").value, "b=c");
    }

    #[test]
    fn scalar_typing_follows_yaml() {
        assert_eq!(type_scalar("0x10"), Ok(Value::from(16)));
        assert_eq!(type_scalar("-7"), Ok(Value::from(-7)));
        assert_eq!(type_scalar("1e3"), Ok(Value::from(1000.0)));
        assert_eq!(type_scalar(".5"), Ok(Value::from(0.5)));
        assert_eq!(type_scalar("TRUE"), Ok(Value::Bool(true)));
        assert_eq!(type_scalar("no"), Ok(Value::Bool(false)));
        assert_eq!(type_scalar("~"), Ok(Value::Null));
        assert_eq!(type_scalar("'it''s'"), Ok(Value::from("it's")));
        assert_eq!(type_scalar("1.2.3"), Ok(Value::from("1.2.3")));
        assert_eq!(type_scalar("0.1,1,99"), Ok(Value::from("0.1,1,99")));
    }

    #[test]
    fn rendering_without_overrides_keeps_comments_and_layout() {
        let template =
            "# what this measures\nserver:\n  model_name: REPLACE_ENV_M   # served name\n";
        let out = render_profile("t", template, &values(&[("M", "llama")]), &[]).expect("renders");
        assert_eq!(
            out,
            "# what this measures\nserver:\n  model_name: llama   # served name\n"
        );
    }

    #[test]
    fn overrides_need_a_mapping_document() {
        let err = render_profile("t", "- a\n- b\n", &BTreeMap::new(), &overrides(&["a=1"]))
            .expect_err("list");
        assert!(
            matches!(
                err,
                RenderError::NotAMapping {
                    found: "a list",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn placeholders_lists_each_name_once_in_order() {
        let names = placeholders("a: REPLACE_ENV_B\nb: REPLACE_ENV_A/REPLACE_ENV_B\nc: ${C}\n");
        assert_eq!(names, vec!["B", "A", "C"]);
    }

    #[test]
    fn nearest_suggests_only_close_names() {
        assert_eq!(nearest("modle", ["model", "tokenizer"]), Some("model"));
        assert_eq!(nearest("zzz", ["model", "tokenizer"]), None);
    }
}

/// Property tests: the renderer never panics, whatever the template, values and overrides, and an override that
/// matched is in the output.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Template text: YAML-ish lines of keys, punctuation, placeholders and arbitrary characters.
    fn template_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("a: ".to_owned()),
            Just("- ".to_owned()),
            Just("\n".to_owned()),
            Just("  ".to_owned()),
            Just("REPLACE_ENV_X".to_owned()),
            Just("REPLACE_ENV_".to_owned()),
            Just("${Y}".to_owned()),
            Just("|\n  ".to_owned()),
            Just("&a *a ".to_owned()),
            Just("{[\"'#:,]}".to_owned()),
            "[a-z0-9_]{0,6}",
            any::<String>(),
        ];
        prop::collection::vec(piece, 0..24).prop_map(|parts| parts.concat())
    }

    fn values() -> impl Strategy<Value = BTreeMap<String, String>> {
        prop::collection::btree_map(
            prop_oneof![Just("X".to_owned()), Just("Y".to_owned()), "[A-Z_]{1,4}"],
            any::<String>(),
            0..4,
        )
    }

    fn override_text() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            ("[a-z.0-9-]{0,12}", any::<String>()).prop_map(|(k, v)| format!("{k}={v}")),
        ]
    }

    /// A mapping document: keys without dots (a dotted key cannot be addressed), scalar leaves.
    fn document() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(Value::from),
            // No `$`: `${a}` in a document is a shell-style placeholder, refused before any override applies.
            "[ -#%-~]{0,8}".prop_map(Value::String),
        ];
        let tree = leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_][a-z0-9_-]{0,6}", inner, 1..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        prop::collection::btree_map("[a-z_][a-z0-9_-]{0,6}", tree, 1..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// Every dotted path to a value of `doc` (list items by index).
    fn paths(doc: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match doc {
            Value::Object(map) => {
                for (k, v) in map {
                    prefix.push(k.clone());
                    out.push(prefix.clone());
                    paths(v, prefix, out);
                    prefix.pop();
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    prefix.push(i.to_string());
                    out.push(prefix.clone());
                    paths(v, prefix, out);
                    prefix.pop();
                }
            }
            _ => {}
        }
    }

    fn lookup<'v>(doc: &'v Value, path: &[String]) -> Option<&'v Value> {
        path.iter().try_fold(doc, |node, segment| match node {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })
    }

    /// An override value as text: scalars of every YAML type, and text that must stay text.
    fn override_value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_owned()),
            Just("yes".to_owned()),
            Just("0x1F".to_owned()),
            Just("1e3".to_owned()),
            Just("-0".to_owned()),
            Just("\"123\"".to_owned()),
            Just("'it''s'".to_owned()),
            Just("a: b".to_owned()),
            Just("- x".to_owned()),
            Just("#x".to_owned()),
            Just("*alias".to_owned()),
            "[ -~]{0,10}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn rendering_never_panics_on_any_template_values_or_overrides(
            template in template_text(),
            values in values(),
            raw_overrides in prop::collection::vec(override_text(), 0..3),
        ) {
            let parsed: Vec<Override> = raw_overrides.iter().filter_map(|o| Override::parse(o).ok()).collect();
            let _ = render_profile("t.yaml.in", &template, &values, &parsed);
            let _ = placeholders(&template);
        }

        #[test]
        fn a_matched_dotted_override_is_in_the_rendered_yaml(
            doc in document(),
            pick in any::<prop::sample::Index>(),
            value in override_value(),
        ) {
            let template = serde_json::to_string(&doc).expect("json");
            let mut all = Vec::new();
            paths(&doc, &mut Vec::new(), &mut all);
            let path = pick.get(&all).clone();
            let text = format!("{}={value}", path.join("."));
            let parsed = Override::parse(&text).expect("override");
            let rendered = render_profile("t.yaml.in", &template, &BTreeMap::new(), std::slice::from_ref(&parsed))
                .expect("a path taken from the document matches");
            let back: Value = serde_saphyr::from_str(&rendered).expect("rendered YAML parses");
            prop_assert_eq!(lookup(&back, &parsed.path), Some(&parsed.value), "{}\n{}", text, rendered);
        }

        #[test]
        fn no_placeholder_value_changes_the_documents_shape(
            doc in document(),
            pick in any::<prop::sample::Index>(),
            value in any::<String>(),
        ) {
            // Put a placeholder at one scalar leaf, in block style as profiles are written.
            let mut all = Vec::new();
            paths(&doc, &mut Vec::new(), &mut all);
            let leaves: Vec<&Vec<String>> = all
                .iter()
                .filter(|p| lookup(&doc, p).is_some_and(|v| !v.is_object() && !v.is_array()))
                .collect();
            prop_assume!(!leaves.is_empty());
            let leaf = pick.get(&leaves);
            let mut with_token = doc.clone();
            let mut node = &mut with_token;
            for segment in leaf.iter() {
                node = match node {
                    Value::Object(map) => map.get_mut(segment).expect("path"),
                    Value::Array(items) => &mut items[segment.parse::<usize>().expect("index")],
                    _ => unreachable!("paths lead through containers"),
                };
            }
            *node = Value::String("REPLACE_ENV_X".to_owned());
            let template = serde_saphyr::to_string(&with_token).expect("yaml");
            let values = BTreeMap::from([("X".to_owned(), value.clone())]);
            let rendered = render_profile("t.yaml.in", &template, &values, &[]).expect("renders");
            let back: Value = serde_saphyr::from_str(&rendered).expect("rendered YAML parses");
            let mut after = Vec::new();
            paths(&back, &mut Vec::new(), &mut after);
            prop_assert_eq!(&after, &all, "{}", rendered);
            // A value that is not text-safe arrives as the same text.
            if !is_plain_safe(&value) {
                prop_assert_eq!(lookup(&back, leaf), Some(&Value::String(value.clone())), "{}", rendered);
            }
        }

        #[test]
        fn a_matched_bare_override_sets_every_key_of_that_name(
            doc in document(),
            pick in any::<prop::sample::Index>(),
            value in override_value(),
        ) {
            let template = serde_json::to_string(&doc).expect("json");
            let mut all = Vec::new();
            paths(&doc, &mut Vec::new(), &mut all);
            let keys: Vec<&String> = all
                .iter()
                .filter_map(|p| p.last())
                .filter(|k| k.parse::<usize>().is_err())
                .collect();
            let key = pick.get(&keys).to_string();
            let parsed = Override::parse(&format!("{key}={value}")).expect("override");
            let rendered = render_profile("t.yaml.in", &template, &BTreeMap::new(), std::slice::from_ref(&parsed))
                .expect("a key taken from the document matches");
            let back: Value = serde_saphyr::from_str(&rendered).expect("rendered YAML parses");
            let mut after = Vec::new();
            paths(&back, &mut Vec::new(), &mut after);
            for p in after.iter().filter(|p| p.last() == Some(&key)) {
                // Under a key that was set, the old subtree is gone: only the outermost occurrences are checked.
                let outermost = !p[..p.len() - 1].contains(&key);
                if outermost {
                    prop_assert_eq!(lookup(&back, p), Some(&parsed.value), "{}", rendered);
                }
            }
        }
    }
}
