//! How inference-perf names a request's failure (`apis/base.py` `ErrorResponseInfo`): the exception type its
//! aiohttp client raised and the message. Its per-request reports and its circuit breakers' expressions both read
//! them, so they are named once, here.

use crate::record::{ErrorClass, Outcome, RequestRecord};

/// The exception type inference-perf's fix for short answers records (kubernetes-sigs/inference-perf#746).
pub const TRUNCATED_RESPONSE_ERROR: &str = "TruncatedResponseError";

/// How inference-perf records `r`'s failure: its exception type and message; `None` for a success.
pub fn failure(r: &RequestRecord) -> Option<(String, String)> {
    match r.outcome() {
        Outcome::Succeeded => None,
        Outcome::Truncated => Some((TRUNCATED_RESPONSE_ERROR.to_owned(), truncated_message(r))),
        Outcome::Failed(key) => Some((
            error_type(r, key.class),
            r.error
                .as_ref()
                .map_or_else(String::new, |e| e.message.clone()),
        )),
    }
}

/// `delivered 19 of 800 requested output tokens (finish_reason length)`.
fn truncated_message(r: &RequestRecord) -> String {
    let requested = r
        .max_tokens
        .map_or_else(|| "?".to_owned(), |m| m.to_string());
    let reason = r.finish_reason.as_ref().map_or("none", |f| f.as_str());
    format!(
        "delivered {} of {requested} requested output tokens (finish_reason {reason})",
        r.output_tokens()
    )
}

/// The exception name inference-perf (aiohttp) records for each way a request fails.
pub fn error_type(r: &RequestRecord, class: ErrorClass) -> String {
    match class {
        ErrorClass::HttpStatus => format!(
            "HTTP Error {}",
            r.http_status
                .map_or_else(|| "?".to_owned(), |s| s.to_string())
        ),
        ErrorClass::Timeout => "TimeoutError".to_owned(),
        ErrorClass::Connect => "ClientConnectorError".to_owned(),
        ErrorClass::ConnectionReset => "ServerDisconnectedError".to_owned(),
        ErrorClass::StreamCut => "ClientPayloadError".to_owned(),
        ErrorClass::MalformedEvent => "JSONDecodeError".to_owned(),
        ErrorClass::Cancelled | ErrorClass::ClientCancelled => "CancelledError".to_owned(),
        ErrorClass::Other => "Exception".to_owned(),
    }
}
