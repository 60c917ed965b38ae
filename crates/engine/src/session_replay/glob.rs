//! Python's `glob.glob(pattern, recursive=True)`, which inference-perf expands `trace_files` patterns with
//! (`otel_trace_replay_datagen.py` `resolve_trace_files`): a pattern's components are matched one directory level
//! at a time with `fnmatch` (`*`, `?`, `[seq]`, `[!seq]`; case-sensitive, as on POSIX), a `**` component matches
//! any number of directories (none included), and names starting with `.` match only a component that starts with
//! `.` too (`**` never enters them).

use std::path::{Path, PathBuf};

/// Whether `pattern` holds glob characters, as upstream decides (`"*" in path or "?" in path`).
pub(super) fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// Every existing path `pattern` matches, in no particular order (Python's own order is the file system's).
pub(super) fn expand(pattern: &str) -> Vec<PathBuf> {
    let (root, rest) = match pattern.strip_prefix('/') {
        Some(rest) => (PathBuf::from("/"), rest),
        None => (PathBuf::new(), pattern),
    };
    let components: Vec<&str> = rest.split('/').filter(|c| !c.is_empty()).collect();
    let mut found = Vec::new();
    walk(&root, &components, &mut found);
    found
}

fn walk(base: &Path, components: &[&str], found: &mut Vec<PathBuf>) {
    let Some((first, rest)) = components.split_first() else {
        if base.exists() && !base.as_os_str().is_empty() {
            found.push(base.to_owned());
        }
        return;
    };
    if *first == "**" {
        // Zero directories, then each directory below (not hidden), recursively.
        walk(base, rest, found);
        for dir in subdirectories(base) {
            walk(&dir, components, found);
        }
        return;
    }
    if !first.contains(['*', '?', '[']) {
        walk(&base.join(first), rest, found);
        return;
    }
    let listing = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let Ok(entries) = std::fs::read_dir(listing) else {
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| first.starts_with('.') || !name.starts_with('.'))
        .filter(|name| fnmatch(name, first))
        .collect();
    names.sort();
    for name in names {
        walk(&base.join(name), rest, found);
    }
}

/// The directories right under `base` (not hidden), sorted.
fn subdirectories(base: &Path) -> Vec<PathBuf> {
    let listing = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let Ok(entries) = std::fs::read_dir(listing) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| base.join(e.file_name()))
        .collect();
    dirs.sort();
    dirs
}

/// Python's `fnmatch.fnmatchcase`: `*` any run of characters, `?` one, `[seq]` one of seq (ranges `a-z`),
/// `[!seq]` one not in it; a `[` without its `]` is itself.
fn fnmatch(name: &str, pattern: &str) -> bool {
    let name: Vec<char> = name.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    matches_from(&name, &pattern)
}

fn matches_from(name: &[char], pattern: &[char]) -> bool {
    let Some((&p, rest)) = pattern.split_first() else {
        return name.is_empty();
    };
    match p {
        '*' => (0..=name.len()).any(|skip| matches_from(&name[skip..], rest)),
        '?' => !name.is_empty() && matches_from(&name[1..], rest),
        '[' => match class(rest) {
            Some((negated, members, after)) => name.first().is_some_and(|c| {
                let inside = members.iter().any(|&(lo, hi)| lo <= *c && *c <= hi);
                inside != negated && matches_from(&name[1..], after)
            }),
            None => name.first() == Some(&'[') && matches_from(&name[1..], rest),
        },
        literal => name.first() == Some(&literal) && matches_from(&name[1..], rest),
    }
}

/// A `[...]` class after its `[`: whether negated, its ranges, and the pattern after its `]`.
type Class<'p> = (bool, Vec<(char, char)>, &'p [char]);

fn class(pattern: &[char]) -> Option<Class<'_>> {
    let (negated, body) = match pattern.first() {
        Some('!') => (true, &pattern[1..]),
        _ => (false, pattern),
    };
    // A `]` right after `[` or `[!` is a member, as in Python.
    let start = usize::from(body.first() == Some(&']'));
    let close = start + body.get(start..)?.iter().position(|c| *c == ']')?;
    let members = &body[..close];
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < members.len() {
        if i + 2 < members.len() && members[i + 1] == '-' {
            ranges.push((members[i], members[i + 2]));
            i += 3;
        } else {
            ranges.push((members[i], members[i]));
            i += 1;
        }
    }
    Some((negated, ranges, &body[close + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_takes_stars_marks_and_classes_as_python_does() {
        assert!(fnmatch("trace_01.json", "*.json"));
        assert!(fnmatch("trace_01.json", "trace_??.json"));
        assert!(!fnmatch("trace_1.json", "trace_??.json"));
        assert!(fnmatch("a7.json", "a[0-9].json"));
        assert!(!fnmatch("ab.json", "a[0-9].json"));
        assert!(fnmatch("ab.json", "a[!0-9].json"));
        assert!(fnmatch("]x", "[]]x"));
        // An unclosed `[` is a literal.
        assert!(fnmatch("[x", "[x"));
        assert!(!fnmatch("trace.JSON", "*.json"));
    }

    #[test]
    fn a_double_star_reaches_every_level_and_hidden_names_only_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for path in [
            "a.json",
            "b.txt",
            ".hidden.json",
            "sub/c.json",
            "sub/deeper/d.json",
            ".git/e.json",
        ] {
            let full = root.join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(&full, "{}").expect("write");
        }
        let names = |pattern: &str| -> Vec<String> {
            let mut found: Vec<String> = expand(&format!("{}/{pattern}", root.display()))
                .iter()
                .map(|p| {
                    p.strip_prefix(root)
                        .expect("under root")
                        .display()
                        .to_string()
                })
                .collect();
            found.sort();
            found
        };
        assert_eq!(names("*.json"), ["a.json"]);
        assert_eq!(names(".*.json"), [".hidden.json"]);
        assert_eq!(
            names("**/*.json"),
            ["a.json", "sub/c.json", "sub/deeper/d.json"]
        );
        assert_eq!(names("sub/*/*.json"), ["sub/deeper/d.json"]);
        assert!(names("nothing/*.json").is_empty());
    }
}
