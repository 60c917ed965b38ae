//! `mlperf_log_trace.json`: LoadGen's Chrome trace-event file (`logging.h` `ChromeTracer`), written when
//! `LogSettings::enable_trace` is on, which is its default; LoadGen opens the file whatever the setting and leaves it
//! empty when tracing is off.
//!
//! What LoadGen traces per sample (`loadgen.cc` `ResponseDelegateDetailed`), and llmbench writes from each record:
//! - Server: a counter event `Token_Latency` at the scheduled time with `issue_delay` (sent − scheduled) and
//!   `issue_to_done` (first token − sent), when a first token came, then `Latency` with `issue_to_done` (end −
//!   sent);
//! - the other scenarios: an async pair `Token` (`b` at the scheduled time, `e` at the first token);
//! - every scenario: the async pair `Sample` (`b` at the scheduled time with `sample_seq`, `query_seq`,
//!   `sample_idx`, `issue_start_ns` and `complete_ns`, `e` at the completion).
//!
//! Times are µs from the log's origin with three decimals (`std::fixed`, `setprecision(3)`), every line is
//! LoadGen's (the `"ph": "C"` and `"ph":"e", ` spacing included), the footer names the origin in Unix µs. What
//! llmbench does not write: LoadGen's scopes of its own threads and functions (`IssueQuery`, `SampleLoop`,
//! `LogDetail`, `IOThreadLoop` …), which describe LoadGen's internals, not the SUT; no such code runs here.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use llmbench_model::record::RequestRecord;

use super::MlperfError;
use super::settings::Scenario;

/// The trace's file name.
pub const TRACE_JSON: &str = "mlperf_log_trace.json";

/// One pass of the test as the trace numbers its queries.
#[derive(Debug, Clone, Copy)]
pub struct TracePass {
    /// The pass's stage among the run's.
    pub stage: u32,
    /// The first request id of the pass, and its samples per query (Offline: every sample of the pass).
    pub first_id: u64,
    pub samples_per_query: u64,
    /// The query sequence id of the pass's first query (queries number on across passes).
    pub first_query: u64,
}

/// Writes the trace, record by record, to a file.
pub struct TraceWriter {
    out: std::io::BufWriter<std::fs::File>,
    path: String,
    pid: u32,
    scenario: Scenario,
    origin_unix_ns: u64,
    line: String,
}

/// µs with three decimals from ns, as `Micros(…).count()` streams under `setprecision(3)`.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl TraceWriter {
    /// Opens `path` and writes the header. `origin_unix_ns`: the log's origin (request times count from it).
    pub fn create(
        path: &Path,
        pid: u32,
        scenario: Scenario,
        origin_unix_ns: u64,
    ) -> Result<Self, MlperfError> {
        let file = std::fs::File::create(path).map_err(|source| MlperfError::Write {
            path: path.display().to_string(),
            source,
        })?;
        let mut writer = TraceWriter {
            out: std::io::BufWriter::new(file),
            path: path.display().to_string(),
            pid,
            scenario,
            origin_unix_ns,
            line: String::new(),
        };
        writer.put("{\"traceEvents\":[\n")?;
        Ok(writer)
    }

    fn put(&mut self, text: &str) -> Result<(), MlperfError> {
        self.out
            .write_all(text.as_bytes())
            .map_err(|source| MlperfError::Write {
                path: self.path.clone(),
                source,
            })
    }

    /// The events of one record of `pass`; `sample_idx` is the dataset index it carried. A failed request has no
    /// completion LoadGen would see, and is left out.
    pub fn record(
        &mut self,
        record: &RequestRecord,
        pass: &TracePass,
        sample_idx: usize,
    ) -> Result<(), MlperfError> {
        if record.error.is_some() {
            return Ok(());
        }
        let pid = self.pid;
        let scheduled = record.scheduled_ns;
        let issue_delay = record.sent_ns.saturating_sub(scheduled);
        let first_token = record
            .ttft_from_scheduled_ns()
            .map(|ttft| scheduled.saturating_add(ttft));
        let sample_seq = record.id;
        let in_pass = record.id.saturating_sub(pass.first_id);
        let query_seq = pass.first_query + in_pass / pass.samples_per_query.max(1);
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        match (self.scenario, first_token) {
            (Scenario::Server, Some(first)) => {
                let _ = writeln!(
                    line,
                    "{{\"name\":\"Token_Latency\",\"ph\": \"C\",\"pid\":{pid},\"ts\":{},\"args\":{{ \
                     \"issue_delay\":{issue_delay},\"issue_to_done\":{}}}}},",
                    micros(scheduled),
                    first.saturating_sub(record.sent_ns)
                );
            }
            (Scenario::Server, None) => {}
            (_, Some(first)) => {
                self.sample_pair(
                    &mut line,
                    "Token",
                    scheduled,
                    first,
                    sample_seq,
                    query_seq,
                    sample_idx,
                    issue_delay,
                );
            }
            (_, None) => {}
        }
        if self.scenario == Scenario::Server {
            let _ = writeln!(
                line,
                "{{\"name\":\"Latency\",\"ph\": \"C\",\"pid\":{pid},\"ts\":{},\"args\":{{ \
                 \"issue_delay\":{issue_delay},\"issue_to_done\":{}}}}},",
                micros(scheduled),
                record.end_ns.saturating_sub(record.sent_ns)
            );
        }
        self.sample_pair(
            &mut line,
            "Sample",
            scheduled,
            record.end_ns,
            sample_seq,
            query_seq,
            sample_idx,
            issue_delay,
        );
        let result = self.put(&line);
        self.line = line;
        result
    }

    /// `TraceSample`: an async begin with the sample's arguments, and its end.
    #[allow(clippy::too_many_arguments)]
    fn sample_pair(
        &self,
        line: &mut String,
        name: &str,
        scheduled: u64,
        done: u64,
        sample_seq: u64,
        query_seq: u64,
        sample_idx: usize,
        issue_delay: u64,
    ) {
        let pid = self.pid;
        let _ = writeln!(
            line,
            "{{\"name\":\"{name}\",\"cat\":\"default\",\"ph\":\"b\",\"pid\":{pid},\"id\":{sample_seq},\"ts\":{},\
             \"args\":{{\"sample_seq\":{sample_seq},\"query_seq\":{query_seq},\"sample_idx\":{sample_idx},\
             \"issue_start_ns\":{issue_delay},\"complete_ns\":{}}}}},",
            micros(scheduled),
            done.saturating_sub(scheduled)
        );
        let _ = writeln!(
            line,
            "{{\"name\":\"{name}\",\"cat\":\"default\",\"ph\":\"e\", \"pid\":{pid},\"id\":{sample_seq},\"ts\":{}}},",
            micros(done)
        );
    }

    /// `WriteTraceEventFooter`: the closing event, the display unit and the origin in Unix µs.
    pub fn finish(mut self) -> Result<(), MlperfError> {
        let footer = format!(
            "{{\"name\":\"LastTrace\"}}\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{\n\"ts\":{},\n\
             \"version\":\"MLPerf LoadGen v1.0\"\n}}\n}}\n",
            micros(self.origin_unix_ns)
        );
        self.put(&footer)?;
        self.out.flush().map_err(|source| MlperfError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64, scheduled: u64, sent: u64, first: u64, end: u64) -> RequestRecord {
        RequestRecord::builder(id)
            .sent(sent)
            .scheduled(scheduled)
            .end(end)
            .streaming(true)
            .ok()
            .content_at(first, 1)
            .build()
    }

    fn trace(scenario: Scenario, records: &[(RequestRecord, usize)], pass: TracePass) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TRACE_JSON);
        let mut writer =
            TraceWriter::create(&path, 7, scenario, 1_795_865_291_153_258_123).unwrap();
        for (r, sample) in records {
            writer.record(r, &pass, *sample).unwrap();
        }
        writer.finish().unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn a_server_sample_is_two_counters_and_an_async_pair_in_loadgens_bytes() {
        // Scheduled at 66.629 µs, sent 80 ns later, first token at 80.039 µs, done at 84.856 µs.
        let r = record(3, 66_629, 66_709, 80_039, 84_856);
        let pass = TracePass {
            stage: 0,
            first_id: 0,
            samples_per_query: 1,
            first_query: 0,
        };
        let text = trace(Scenario::Server, &[(r, 9)], pass);
        assert_eq!(
            text,
            "{\"traceEvents\":[\n\
             {\"name\":\"Token_Latency\",\"ph\": \"C\",\"pid\":7,\"ts\":66.629,\"args\":{ \"issue_delay\":80,\"issue_to_done\":13330}},\n\
             {\"name\":\"Latency\",\"ph\": \"C\",\"pid\":7,\"ts\":66.629,\"args\":{ \"issue_delay\":80,\"issue_to_done\":18147}},\n\
             {\"name\":\"Sample\",\"cat\":\"default\",\"ph\":\"b\",\"pid\":7,\"id\":3,\"ts\":66.629,\"args\":{\"sample_seq\":3,\"query_seq\":3,\"sample_idx\":9,\"issue_start_ns\":80,\"complete_ns\":18227}},\n\
             {\"name\":\"Sample\",\"cat\":\"default\",\"ph\":\"e\", \"pid\":7,\"id\":3,\"ts\":84.856},\n\
             {\"name\":\"LastTrace\"}\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\n\"ts\":1795865291153258.123,\n\
             \"version\":\"MLPerf LoadGen v1.0\"\n}\n}\n"
        );
        // LoadGen's own bytes parse as JSON once its trailing comma before LastTrace is a comma between events.
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["traceEvents"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn an_offline_pass_is_one_query_and_traces_first_tokens_as_async_pairs() {
        // Offline's one query of a pass starting at id 10 holds every sample: query_seq is the pass's first query.
        let pass = TracePass {
            stage: 1,
            first_id: 10,
            samples_per_query: 4,
            first_query: 10,
        };
        let records = [
            (record(10, 0, 1_000, 5_000, 9_000), 2),
            (record(13, 0, 1_000, 6_000, 12_000), 0),
        ];
        let text = trace(Scenario::Offline, &records, pass);
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let events = json["traceEvents"].as_array().unwrap();
        let names: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|e| Some((e["name"].as_str()?, e["ph"].as_str()?)))
            .collect();
        assert_eq!(
            names,
            [
                ("Token", "b"),
                ("Token", "e"),
                ("Sample", "b"),
                ("Sample", "e"),
                ("Token", "b"),
                ("Token", "e"),
                ("Sample", "b"),
                ("Sample", "e"),
            ]
        );
        assert_eq!(events[6]["args"]["query_seq"], 10);
        assert_eq!(events[6]["args"]["sample_idx"], 0);
        assert_eq!(events[6]["args"]["complete_ns"], 12_000);
        assert_eq!(events[1]["ts"], 5.0);
    }
}
