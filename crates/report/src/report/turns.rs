//! The per-turn table of a multi-turn run (`summary.json`'s `conversations.turns`): how each turn index fared
//! across conversations, so the cost of the growing history — longer prompts, slower first tokens — reads at a
//! glance.

use llmbench_metrics::metrics::stats::Stats;
use llmbench_metrics::metrics::{AdapterSummary, ConversationSummary};

use super::table::{Align, Table, Tone, num};

/// One row per turn index, from the first: requests, successes, mean input tokens, mean TTFT and E2E in ms.
pub fn turn_table(conversations: &ConversationSummary) -> Table {
    let mut table = Table::new(&[
        ("turn", Align::Left),
        ("requests", Align::Right),
        ("ok", Align::Right),
        ("input tok mean", Align::Right),
        ("TTFT ms mean", Align::Right),
        ("E2E ms mean", Align::Right),
    ]);
    let mean = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), num);
    for turn in &conversations.turns {
        table.push(
            Tone::Plain,
            vec![
                // Counted from 1, as a person counts turns (summary.json counts from 0).
                (turn.turn + 1).to_string(),
                turn.requests.to_string(),
                turn.succeeded.to_string(),
                mean(turn.input_tokens_mean),
                mean(turn.ttft_ms_mean),
                mean(turn.e2e_ms_mean),
            ],
        );
    }
    table
}

/// One row per LoRA adapter (or AIPerf model) the requests went to, in name order (`summary.json`'s `adapters`):
/// requests, failures, output tokens/s, and TTFT, TPOT and E2E p50/p99 in ms, so adapters compare at a glance.
pub fn adapter_table(adapters: &[AdapterSummary]) -> Table {
    let mut table = Table::new(&[
        ("adapter", Align::Left),
        ("requests", Align::Right),
        ("failed", Align::Right),
        ("out tok/s", Align::Right),
        ("TTFT ms p50/p99", Align::Right),
        ("TPOT ms p50/p99", Align::Right),
        ("E2E ms p50/p99", Align::Right),
    ]);
    let pair = |s: &Option<Stats>| {
        s.as_ref().map_or_else(
            || "-".to_owned(),
            |s| format!("{}/{}", num(s.p50), num(s.p99)),
        )
    };
    for a in adapters {
        let s = &a.summary;
        table.push(
            if s.requests.failed > 0 {
                Tone::Warn
            } else {
                Tone::Plain
            },
            vec![
                a.adapter.clone(),
                s.requests.total.to_string(),
                s.requests.failed.to_string(),
                num(s.throughput.output_tokens_per_s),
                pair(&s.latency_ms.ttft),
                pair(&s.latency_ms.tpot),
                pair(&s.latency_ms.e2e),
            ],
        );
    }
    table
}

/// The line above the table: how many conversations, and how many went through whole.
pub fn conversations_line(conversations: &ConversationSummary) -> String {
    format!(
        "{} conversations, {} with every turn successful",
        conversations.conversations, conversations.all_turns_succeeded
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmbench_metrics::metrics::TurnSummary;

    #[test]
    fn each_turn_index_is_a_row_counted_from_one() {
        let conversations = ConversationSummary {
            conversations: 4,
            all_turns_succeeded: 3,
            turns: vec![
                TurnSummary {
                    turn: 0,
                    requests: 4,
                    succeeded: 4,
                    input_tokens_mean: Some(120.0),
                    ttft_ms_mean: Some(52.3),
                    e2e_ms_mean: Some(510.0),
                },
                TurnSummary {
                    turn: 1,
                    requests: 4,
                    succeeded: 3,
                    input_tokens_mean: Some(251.6),
                    ttft_ms_mean: None,
                    e2e_ms_mean: Some(640.0),
                },
            ],
        };
        let table = turn_table(&conversations);
        let rows: Vec<String> = table.rows.iter().map(|(_, c)| c.join(" | ")).collect();
        assert_eq!(
            rows,
            [
                "1 | 4 | 4 | 120 | 52.3 | 510",
                // Not streamed: no TTFT.
                "2 | 4 | 3 | 252 | - | 640",
            ]
        );
        assert_eq!(
            conversations_line(&conversations),
            "4 conversations, 3 with every turn successful"
        );
    }

    #[test]
    fn each_adapter_is_a_row_with_its_own_figures_and_failures_stand_out() {
        use llmbench_model::record::RequestRecord;
        // Adapter `a`: one request, first token at 20 ms, 3 tokens 10 ms apart, done at 50 ms; `b`: one failure.
        let ok = RequestRecord::builder(0)
            .sent(0)
            .content_at(20_000_000, 1)
            .content_at(30_000_000, 1)
            .content_at(40_000_000, 1)
            .end(50_000_000)
            .ok()
            .build();
        let failed = RequestRecord::builder(1).end(5_000_000).status(500).build();
        let adapters = [
            AdapterSummary {
                adapter: "a".to_owned(),
                summary: llmbench_metrics::metrics::summarize(&[ok], None),
            },
            AdapterSummary {
                adapter: "b".to_owned(),
                summary: llmbench_metrics::metrics::summarize(&[failed], None),
            },
        ];
        let table = adapter_table(&adapters);
        let rows: Vec<(Tone, String)> = table
            .rows
            .iter()
            .map(|(tone, c)| (*tone, c.join(" | ")))
            .collect();
        assert_eq!(
            rows,
            [
                (
                    Tone::Plain,
                    "a | 1 | 0 | 60.0 | 20.0/20.0 | 10.0/10.0 | 50.0/50.0".to_owned()
                ),
                (Tone::Warn, "b | 1 | 1 | 0.000 | - | - | -".to_owned()),
            ]
        );
    }
}
