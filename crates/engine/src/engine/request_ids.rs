//! The ids each request carries so a user can find it on the server: an `x-request-id` header (vLLM takes it as
//! its request id with `--enable-request-id-headers`; gateways such as Envoy, in front of llm-d, log it) and a W3C
//! `traceparent` (an engine with OpenTelemetry tracing, vLLM's `--otlp-traces-endpoint`, makes its spans children
//! of it). Both are recorded in the request's record.
//!
//! - `x-request-id` is `llmbench-<run id>-<n>`, `n` the record's id (a shard's: `llmbench-<run id>-s<shard>-<n>`,
//!   as the shards of one run number their records alike): a server log line names the run and the record.
//! - The `traceparent` is `00-<trace id>-<span id>-01`: each request its own trace, marked sampled so a server that
//!   samples by its parent keeps it. The ids are a bijective mix of the request's number with a key drawn at
//!   random for each run, so they are unique within a run, look random as W3C asks (a collector may sample on
//!   their bits), and differ from every earlier run's: a run repeated with the same seed must not send the trace
//!   ids of the first, or a trace store would join the two runs' spans. Nothing depends on the ids but the user
//!   looking for a request, so they need not replay.
//!
//! The run's part (prefix, key) is prepared before the clock starts; per request, the id is a few digits appended
//! and the trace ids two multiplications, made before the request's send time is taken.

use llmbench_model::record::TraceParent;

/// The `x-request-id` header's name.
pub(crate) const REQUEST_ID_HEADER: &str = "x-request-id";
/// The W3C Trace Context header's name.
pub(crate) const TRACEPARENT_HEADER: &str = "traceparent";

/// How a run names its requests. A header the profile sets itself is left to it: its value wins, and llmbench
/// records none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestIds {
    /// `llmbench-<run id>-`: each request's `x-request-id` is this and its number; `None` sends none.
    request_id_prefix: Option<String>,
    /// The run's random key the trace ids are mixed from; `None` sends no `traceparent`.
    trace_key: Option<[u64; 2]>,
}

impl RequestIds {
    /// Sends neither header (the pre-flight's probe, tests).
    pub const NONE: RequestIds = RequestIds {
        request_id_prefix: None,
        trace_key: None,
    };

    /// The ids of run `run_id` (shard `shard` of `shards`), leaving out the headers in `profile_headers` (any
    /// case) or named by the per-request header `session_header` (inference-perf's `session_id_header_key`).
    /// `prefix` (vLLM's `--request-id-prefix`) replaces `llmbench-<run id>-`.
    pub fn for_run(
        run_id: &str,
        shard: u32,
        shards: u32,
        profile_headers: &[(String, String)],
        session_header: Option<&str>,
        prefix: Option<&str>,
    ) -> RequestIds {
        let taken = |name: &str| {
            profile_headers
                .iter()
                .map(|(n, _)| n.as_str())
                .chain(session_header)
                .any(|n| n.eq_ignore_ascii_case(name))
        };
        let request_id_prefix = (!taken(REQUEST_ID_HEADER)).then(|| {
            let prefix = prefix.map_or_else(|| format!("llmbench-{run_id}-"), str::to_owned);
            if shards > 1 {
                format!("{prefix}s{shard}-")
            } else {
                prefix
            }
        });
        let trace_key = (!taken(TRACEPARENT_HEADER)).then(|| [rand::random(), rand::random()]);
        RequestIds {
            request_id_prefix,
            trace_key,
        }
    }

    /// Request `n`'s `x-request-id`, if the run sends one.
    pub fn request_id(&self, n: u64) -> Option<Box<String>> {
        use std::fmt::Write as _;
        let prefix = self.request_id_prefix.as_deref()?;
        // Exactly the id's length, so it never reallocates; boxed again so the record holds a thin pointer.
        let digits = n.checked_ilog10().map_or(1, |d| d as usize + 1);
        let mut id = String::with_capacity(prefix.len() + digits);
        id.push_str(prefix);
        // Writing into a String cannot fail.
        let _ = write!(id, "{n}");
        Some(Box::new(id))
    }

    /// Request `n`'s `traceparent`, if the run sends one.
    pub fn traceparent(&self, n: u64) -> Option<TraceParent> {
        let [a, b] = self.trace_key?;
        // Each half is a bijection of `n` for a given key (an odd multiplier, then splitmix64's finalizer), so no
        // two requests of a run share a trace id; W3C forbids all-zero ids, which a key could produce for one n.
        let high = mix(a ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let low = mix(b ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let span = mix(a.rotate_left(32) ^ b ^ n.wrapping_mul(0xA24B_AED4_963E_E407));
        let mut trace_id = [0u8; 16];
        trace_id[..8].copy_from_slice(&high.to_be_bytes());
        trace_id[8..].copy_from_slice(&low.to_be_bytes());
        if trace_id == [0; 16] {
            trace_id[15] = 1;
        }
        Some(TraceParent {
            trace_id,
            span_id: span.max(1).to_be_bytes(),
        })
    }

    /// Whether the run sends either header.
    pub fn any(&self) -> bool {
        self.request_id_prefix.is_some() || self.trace_key.is_some()
    }
}

/// splitmix64's finalizer: a bijection of u64 that spreads every input bit over the output.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn the_request_id_names_the_run_and_the_record() {
        let ids = RequestIds::for_run("inference-perf-sanity-1", 0, 1, &[], None, None);
        assert_eq!(
            ids.request_id(17).as_deref().map(String::as_str),
            Some("llmbench-inference-perf-sanity-1-17")
        );
        let shard = RequestIds::for_run("run", 2, 4, &[], None, None);
        assert_eq!(
            shard.request_id(0).as_deref().map(String::as_str),
            Some("llmbench-run-s2-0")
        );
    }

    #[test]
    fn a_request_id_prefix_replaces_the_run_name() {
        let ids = RequestIds::for_run("r", 0, 1, &[], None, Some("bench-a1b2-"));
        assert_eq!(
            ids.request_id(0).as_deref().map(String::as_str),
            Some("bench-a1b2-0")
        );
        assert_eq!(
            ids.request_id(12).as_deref().map(String::as_str),
            Some("bench-a1b2-12")
        );
        // Shards still number apart, so no two requests of a run share an id.
        let shard = RequestIds::for_run("r", 1, 2, &[], None, Some("bench-"));
        assert_eq!(
            shard.request_id(3).as_deref().map(String::as_str),
            Some("bench-s1-3")
        );
    }

    #[test]
    fn trace_ids_are_unique_in_a_run_and_new_in_every_run() {
        let ids = RequestIds::for_run("r", 0, 1, &[], None, None);
        let parents: Vec<TraceParent> = (0..10_000)
            .map(|n| ids.traceparent(n).expect("sent"))
            .collect();
        let traces: HashSet<[u8; 16]> = parents.iter().map(|p| p.trace_id).collect();
        assert_eq!(traces.len(), parents.len());
        assert_eq!(
            ids.traceparent(5),
            ids.traceparent(5),
            "one request, one id"
        );
        let again = RequestIds::for_run("r", 0, 1, &[], None, None);
        assert_ne!(again.traceparent(0), ids.traceparent(0));
        let text = ids.traceparent(0).expect("sent").to_string();
        assert!(text.starts_with("00-") && text.ends_with("-01"), "{text}");
        assert_eq!(text.len(), TraceParent::LEN);
    }

    #[test]
    fn a_header_the_profile_sets_is_left_to_it_in_any_case() {
        let headers = [("X-Request-ID".to_owned(), "mine".to_owned())];
        let ids = RequestIds::for_run("r", 0, 1, &headers, None, None);
        assert_eq!(ids.request_id(1), None);
        assert!(ids.traceparent(1).is_some());
        let headers = [("TraceParent".to_owned(), "00-…".to_owned())];
        let ids = RequestIds::for_run("r", 0, 1, &headers, Some("x-request-id"), None);
        assert!(!ids.any());
        assert_eq!(RequestIds::NONE.request_id(1), None);
    }
}
