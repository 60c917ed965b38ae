//! The per-turn table of a multi-turn run (`summary.json`'s `conversations.turns`): how each turn index fared
//! across conversations, so the cost of the growing history — longer prompts, slower first tokens — reads at a
//! glance.

use llmbench_metrics::metrics::ConversationSummary;

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
}
