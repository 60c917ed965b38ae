//! The failures of a run as a table: one row per error class and HTTP status, with its count, its share of the
//! requests and one message it carried, so a failed run says why on screen and in `report.html`.

use llmbench_metrics::metrics::Summary;

use super::table::{Align, Table, Tone, percent};

/// The summary's error counts by key (`connect`, `http_429`), the commonest first, ties by key.
pub(crate) fn error_parts(summary: &Summary) -> Vec<(String, u64)> {
    let mut parts: Vec<(String, u64)> = summary
        .errors
        .iter()
        .map(|(key, count)| (key.clone(), *count))
        .collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    parts
}

/// An error key split into its class and HTTP status: `http_429` is class `http_status`, status 429 (the summary
/// names HTTP failures by their status, `record::ErrorKey`).
fn class_and_status(key: &str) -> (&str, Option<&str>) {
    match key.strip_prefix("http_") {
        Some(status) if !status.is_empty() && status.bytes().all(|b| b.is_ascii_digit()) => {
            ("http_status", Some(status))
        }
        _ => (key, None),
    }
}

/// The error table of `summary` (the run's overall figures, or a stage's), commonest first; `None` when nothing
/// failed. The sample is the first message recorded under that key, `-` when its requests carried none (a
/// non-2xx status without a body).
pub fn error_table(summary: &Summary) -> Option<Table> {
    if summary.errors.is_empty() {
        return None;
    }
    let total = summary.requests.total.max(1) as f64;
    let mut table = Table::new(&[
        ("error", Align::Left),
        ("HTTP", Align::Right),
        ("count", Align::Right),
        ("share", Align::Right),
        ("sample message", Align::Text),
    ]);
    for (key, count) in error_parts(summary) {
        let (class, status) = class_and_status(&key);
        table.push(
            Tone::Plain,
            vec![
                class.to_owned(),
                status.unwrap_or("-").to_owned(),
                count.to_string(),
                percent(count as f64 / total),
                summary
                    .error_samples
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| "-".to_owned()),
            ],
        );
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use llmbench_metrics::metrics::summarize;
    use llmbench_model::record::{ErrorClass, RequestRecord};

    fn failed(class: ErrorClass, status: Option<u16>, message: &str) -> RequestRecord {
        let mut record = RequestRecord::builder(0).end(1).input_tokens(10);
        if let Some(status) = status {
            record = record.status(status);
        }
        if !message.is_empty() {
            record = record.error(class, message);
        }
        record.build()
    }

    #[test]
    fn one_row_per_class_and_status_commonest_first_with_a_sample() {
        let mut records = vec![failed(
            ErrorClass::HttpStatus,
            Some(200),
            "", // a 200 is no failure: this one succeeded
        )];
        records.extend((0..3).map(|_| {
            failed(
                ErrorClass::HttpStatus,
                Some(429),
                "HTTP 429: {\"error\": \"rate limited\"}",
            )
        }));
        records.push(failed(ErrorClass::HttpStatus, Some(404), ""));
        records.push(failed(ErrorClass::Timeout, None, "no answer within 30 s"));
        records.push(failed(ErrorClass::HttpStatus, Some(503), "overloaded"));
        let table = error_table(&summarize(&records, None)).expect("failures");
        assert_eq!(
            table.header,
            ["error", "HTTP", "count", "share", "sample message"]
        );
        // 7 requests: 3 of them 429 (42.9%); the 404 without a body has no sample; ties by key.
        let rows: Vec<Vec<&str>> = table
            .rows
            .iter()
            .map(|(_, cells)| cells.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec![
                    "http_status",
                    "429",
                    "3",
                    "42.9%",
                    "HTTP 429: {\"error\": \"rate limited\"}"
                ],
                vec!["http_status", "404", "1", "14.3%", "-"],
                vec!["http_status", "503", "1", "14.3%", "overloaded"],
                vec!["timeout", "-", "1", "14.3%", "no answer within 30 s"],
            ]
        );
    }

    #[test]
    fn a_run_without_failures_has_no_error_table() {
        let mut ok = failed(ErrorClass::Other, Some(200), "");
        ok.error = None;
        assert_eq!(error_table(&summarize(&[ok], None)), None);
    }

    #[test]
    fn only_http_keys_with_a_status_are_split() {
        assert_eq!(class_and_status("http_503"), ("http_status", Some("503")));
        assert_eq!(class_and_status("http_status"), ("http_status", None));
        assert_eq!(class_and_status("connect"), ("connect", None));
        let parts = error_parts(&Summary {
            errors: BTreeMap::from([("b".into(), 2), ("a".into(), 2), ("c".into(), 5)]),
            ..summarize::<RequestRecord>(&[], None)
        });
        assert_eq!(
            parts,
            [
                ("c".to_owned(), 5),
                ("a".to_owned(), 2),
                ("b".to_owned(), 2)
            ]
        );
    }
}
