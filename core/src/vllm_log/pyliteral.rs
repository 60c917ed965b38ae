//! The server's arguments from vLLM's "non-default args: %s" line, a Python dict literal, as upstream's
//! `convert_objects_to_dict` reads it (`workload/harnesses/nop_functions.py`): every `Name(…)` (up to the first
//! `)`) becomes `{'Name': '…'}`, repeatedly, then `ast.literal_eval`. What `literal_eval` would refuse (an enum's
//! `<Mode.X: 3>`, a set) leaves the arguments empty, as upstream leaves them when it logs the failure.

use serde_json::{Map, Number, Value};

/// The dict, or `None` where upstream's conversion fails or gives something other than a dict.
pub(crate) fn convert_objects_to_dict(text: &str) -> Option<Map<String, Value>> {
    let mut text = text.to_owned();
    loop {
        let next = replace_objects(&text);
        if next == text {
            break;
        }
        text = next;
    }
    let mut parser = Parser {
        chars: text.chars().collect(),
        at: 0,
    };
    let value = parser.value()?;
    parser.skip_space();
    if parser.at != parser.chars.len() {
        return None;
    }
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// One `re.sub(r"(\w+)\((.*?)\)", …, flags=DOTALL)` pass.
fn replace_objects(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_word(chars[i]) {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let mut run_end = i;
        while run_end < chars.len() && is_word(chars[run_end]) {
            run_end += 1;
        }
        let close = (chars.get(run_end) == Some(&'('))
            .then(|| chars[run_end + 1..].iter().position(|&c| c == ')'))
            .flatten()
            .map(|p| run_end + 1 + p);
        match close {
            Some(close) => {
                let name: String = chars[i..run_end].iter().collect();
                let args: String = chars[run_end + 1..close].iter().collect();
                out.push_str(&format!("{{'{name}': {}}}", python_str_repr(args.trim())));
                i = close + 1;
            }
            None => {
                out.extend(&chars[i..run_end]);
                i = run_end;
            }
        }
    }
    out
}

/// Python's `repr()` of a str.
fn python_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// What `ast.literal_eval` accepts of the Python a vLLM args dict holds: dicts, lists, tuples (as lists),
/// strings (adjacent ones joined), ints, floats, signs, True, False and None.
struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn skip_space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        match self.peek()? {
            '{' => self.dict(),
            '[' => self
                .sequence('[', ']')
                .map(|(items, _)| Value::Array(items)),
            '(' => {
                let (mut items, tuple) = self.sequence('(', ')')?;
                // `(x)` is x; `(x,)` and `()` are tuples, written as lists.
                if !tuple && items.len() == 1 {
                    items.pop()
                } else {
                    Some(Value::Array(items))
                }
            }
            '\'' | '"' => self.strings(),
            'r' | 'R' | 'u' | 'U' if matches!(self.chars.get(self.at + 1), Some('\'' | '"')) => {
                self.strings()
            }
            c if c.is_ascii_digit() || matches!(c, '-' | '+' | '.') => self.number(),
            c if is_word(c) => {
                let start = self.at;
                while self.chars.get(self.at).is_some_and(|&c| is_word(c)) {
                    self.at += 1;
                }
                let name: String = self.chars[start..self.at].iter().collect();
                match name.as_str() {
                    "True" => Some(Value::Bool(true)),
                    "False" => Some(Value::Bool(false)),
                    "None" => Some(Value::Null),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn dict(&mut self) -> Option<Value> {
        self.eat('{');
        let mut map = Map::new();
        loop {
            if self.eat('}') {
                return Some(Value::Object(map));
            }
            let key = self.value()?;
            if !self.eat(':') {
                // A set display: literal_eval gives a set, which is no dict of arguments.
                return None;
            }
            let value = self.value()?;
            let key = match key {
                Value::String(s) => s,
                other => other.to_string(),
            };
            map.insert(key, value);
            if !self.eat(',') {
                return self.eat('}').then_some(Value::Object(map));
            }
        }
    }

    /// The items between `open` and `close`, and whether a comma was seen (a one-item tuple).
    fn sequence(&mut self, open: char, close: char) -> Option<(Vec<Value>, bool)> {
        self.eat(open);
        let mut items = Vec::new();
        let mut comma = false;
        loop {
            if self.eat(close) {
                return Some((items, comma));
            }
            items.push(self.value()?);
            if self.eat(',') {
                comma = true;
            } else {
                return self.eat(close).then_some((items, comma));
            }
        }
    }

    fn strings(&mut self) -> Option<Value> {
        let mut joined = String::new();
        while let Some(c) = self.peek() {
            let raw = matches!(c, 'r' | 'R');
            if matches!(c, 'r' | 'R' | 'u' | 'U') {
                if !matches!(self.chars.get(self.at + 1), Some('\'' | '"')) {
                    break;
                }
                self.at += 1;
            } else if !matches!(c, '\'' | '"') {
                break;
            }
            joined.push_str(&self.string(raw)?);
        }
        Some(Value::String(joined))
    }

    fn string(&mut self, raw: bool) -> Option<String> {
        let quote = *self.chars.get(self.at)?;
        // Triple-quoted strings are not in a logged args dict.
        if self.chars.get(self.at + 1) == Some(&quote)
            && self.chars.get(self.at + 2) == Some(&quote)
        {
            return None;
        }
        self.at += 1;
        let mut out = String::new();
        loop {
            let c = *self.chars.get(self.at)?;
            self.at += 1;
            match c {
                c if c == quote => return Some(out),
                '\n' => return None,
                '\\' if raw => {
                    out.push('\\');
                    if let Some(&next) = self.chars.get(self.at) {
                        out.push(next);
                        self.at += 1;
                    }
                }
                '\\' => {
                    let e = *self.chars.get(self.at)?;
                    self.at += 1;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '0' => out.push('\0'),
                        '\\' | '\'' | '"' => out.push(e),
                        '\n' => {}
                        'x' | 'u' | 'U' => {
                            let len = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex: String =
                                self.chars.get(self.at..self.at + len)?.iter().collect();
                            self.at += len;
                            out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                        }
                        // Python keeps an unknown escape as written.
                        other => {
                            out.push('\\');
                            out.push(other);
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn number(&mut self) -> Option<Value> {
        let negative = if self.eat('-') {
            true
        } else {
            self.eat('+');
            false
        };
        self.skip_space();
        let start = self.at;
        while self
            .chars
            .get(self.at)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_'))
            || (matches!(self.chars.get(self.at), Some('+' | '-'))
                && matches!(self.chars.get(self.at - 1), Some('e' | 'E')))
        {
            self.at += 1;
        }
        let text: String = self.chars[start..self.at]
            .iter()
            .filter(|&&c| c != '_')
            .collect();
        let signed = if negative {
            format!("-{text}")
        } else {
            text.clone()
        };
        if text.chars().all(|c| c.is_ascii_digit()) && !text.is_empty() {
            // Python ints have no bound; beyond i64 they are kept as the nearest float.
            return Some(match signed.parse::<i64>() {
                Ok(n) => Value::Number(n.into()),
                Err(_) => Number::from_f64(signed.parse().ok()?).map(Value::Number)?,
            });
        }
        if text.starts_with(|c: char| c.is_ascii_digit() || c == '.')
            && text
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        {
            return Number::from_f64(signed.parse().ok()?).map(Value::Number);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vllm_args_dict_with_a_config_object_reads_as_upstream_reads_it() {
        // vLLM 0.13's line (its `structured_outputs_config` is a dataclass repr).
        let text = "{'model_tag': 'neuralmagic/Qwen2.5-14B-Instruct-FP8-dynamic', 'host': '0.0.0.0', \
                    'max_model_len': 32768, 'gpu_memory_utilization': 0.15, 'enable_prefix_caching': True, \
                    'structured_outputs_config': StructuredOutputsConfig(backend='xgrammar', \
                    disable_fallback=False, reasoning_parser='')}";
        let args = convert_objects_to_dict(text).unwrap();
        assert_eq!(args["max_model_len"], 32768);
        assert_eq!(args["gpu_memory_utilization"], 0.15);
        assert_eq!(args["enable_prefix_caching"], true);
        // `{'StructuredOutputsConfig': repr("backend='xgrammar', …")}`: the text inside, as one string.
        assert_eq!(
            args["structured_outputs_config"],
            serde_json::json!({"StructuredOutputsConfig":
                "backend='xgrammar', disable_fallback=False, reasoning_parser=''"})
        );
    }

    #[test]
    fn nested_dicts_lists_tuples_and_none_are_kept() {
        let text = "{'model_loader_extra_config': {'enable_multithread_load': True, 'num_threads': 8}, \
                    'sizes': [1, 2, -4], 'pair': (1.5, 'x'), 'one': (3,), 'seed': None}";
        let args = convert_objects_to_dict(text).unwrap();
        assert_eq!(
            serde_json::Value::Object(args),
            serde_json::json!({
                "model_loader_extra_config": {"enable_multithread_load": true, "num_threads": 8},
                "sizes": [1, 2, -4], "pair": [1.5, "x"], "one": [3], "seed": null
            })
        );
    }

    #[test]
    fn what_literal_eval_refuses_gives_no_arguments() {
        // An enum's repr is no literal: upstream logs the failure and keeps its empty args.
        assert_eq!(
            convert_objects_to_dict(
                "{'compilation_config': {'mode': <CompilationMode.VLLM_COMPILE: 3>}}"
            ),
            None
        );
        assert_eq!(convert_objects_to_dict("{'a', 'b'}"), None);
        assert_eq!(convert_objects_to_dict("['not', 'a', 'dict']"), None);
    }
}
