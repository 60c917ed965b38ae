//! Names and label values derived from a run's or an experiment's name, kept within the API's bounds, and who
//! owns an object found by name.
//!
//! A BenchmarkRun's name may be 253 characters long, but a label value may have only 63, and `<run>-launcher-1023`
//! must still be an object name of at most 253. Whatever does not fit is shortened to its head and a hash of the
//! whole, so two long names that share a head still give different values; names that fit are used as they are.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The longest label value (and DNS label).
pub const MAX_LABEL_VALUE: usize = 63;
/// The longest object name (a DNS subdomain).
pub const MAX_OBJECT_NAME: usize = 253;

/// The low 32 bits of 64-bit FNV-1a: stable across versions and platforms, unlike std's hasher.
fn fnv32(text: &str) -> u32 {
    llmbench_api::fnv::fnv1a_64(text.as_bytes()) as u32
}

/// `text` within `max` characters: as it is when it fits, else its head and a hash of the whole, so two long
/// texts that share a head still differ. `text` is a DNS name (lowercase letters, digits, '-' and '.'), and
/// so is the result: it never ends with '-' or '.'.
pub fn bounded_name(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let suffix = format!("{:08x}", fnv32(text));
    let mut cut = max.saturating_sub(suffix.len() + 1);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = text[..cut].trim_end_matches(['-', '.']);
    if head.is_empty() {
        suffix
    } else {
        format!("{head}-{suffix}")
    }
}

/// `name` as a label value: itself when it has at most 63 characters, else shortened with a hash.
pub fn label_value(name: &str) -> String {
    bounded_name(name, MAX_LABEL_VALUE)
}

/// Whether the object of `meta` is controlled by the object with `owner_uid` (a controller owner reference to
/// it). Only such objects are ever updated or deleted by name: a namesake a user made is left alone.
pub fn controlled_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == owner_uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn a_label_value_keeps_a_short_name_and_hashes_a_long_one_into_63_characters() {
        assert_eq!(label_value("bench-1"), "bench-1");
        let exactly = "a".repeat(63);
        assert_eq!(label_value(&exactly), exactly);
        let long_a = format!("{}-a", "x".repeat(250));
        let long_b = format!("{}-b", "x".repeat(250));
        let (a, b) = (label_value(&long_a), label_value(&long_b));
        assert_eq!(a.len(), 63, "{a}");
        assert_ne!(a, b, "names sharing a head stay distinct");
        assert!(
            a.starts_with("xxxx") && a.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
        );
        // A head that would end in '-' or '.' is trimmed, so the value still ends alphanumeric.
        let dotted = format!("{}.{}", "y".repeat(53), "z".repeat(40));
        let value = label_value(&dotted);
        assert!(value.len() <= 63 && !value.contains(".-"), "{value}");
    }

    #[test]
    fn only_a_controller_reference_with_the_owners_uid_counts_as_ownership() {
        let reference = |uid: &str, controller: Option<bool>| OwnerReference {
            api_version: "llmbench.dev/v1alpha1".to_owned(),
            kind: "BenchmarkRun".to_owned(),
            name: "bench-1".to_owned(),
            uid: uid.to_owned(),
            controller,
            block_owner_deletion: None,
        };
        let meta = |refs: Vec<OwnerReference>| ObjectMeta {
            owner_references: Some(refs),
            ..ObjectMeta::default()
        };
        assert!(controlled_by(
            &meta(vec![reference("u1", Some(true))]),
            "u1"
        ));
        assert!(
            !controlled_by(&meta(vec![reference("u2", Some(true))]), "u1"),
            "a namesake run"
        );
        assert!(
            !controlled_by(&meta(vec![reference("u1", None)]), "u1"),
            "not the controller"
        );
        assert!(
            !controlled_by(&ObjectMeta::default(), "u1"),
            "a user's object"
        );
    }
}
