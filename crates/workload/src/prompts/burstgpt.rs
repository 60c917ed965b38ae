//! vLLM's BurstGPT dataset from a local CSV, as `BurstGPTDataset` builds its requests (`vllm/benchmarks/datasets.py`,
//! vllm-project/vllm at 0056b87):
//!
//! - **Reading** (`load_data`): `pd.read_csv`, then the rows whose `Model` is `GPT-4` and whose `Response tokens`
//!   is above 0, in file order.
//! - **Sampling** (`_sample_loaded_data`): `DataFrame.sample(n=num_prompts, random_state=seed)`, with
//!   `replace=True` when the file has fewer rows than that; pandas draws the positions with numpy's legacy
//!   `RandomState(seed).choice` ([`NumpyRandomState`]), so the same rows come in the same order.
//! - **Requests** (`sample`): row `i` (in sampled order) sends the decoded token ids `(i + j) % vocab_size` for `j`
//!   in `0..input_len`, with `input_len` and `output_len` read from the row's third and fourth values (`Request
//!   tokens`, `Response tokens` in BurstGPT's column order) as `int(...)`; `prompt_len` is that `input_len`, and
//!   `vocab_size` is the tokenizer's base vocabulary (added tokens left out, as `tokenizer.vocab_size`).

use std::path::{Path, PathBuf};

use super::{PromptError, csv_error, csv_reader, read_text};
use crate::workload::BurstGpt;
use crate::workload::limits::MAX_TOKENS;
use llmbench_data::{DataError, Prompt};
use llmbench_text::py_random::NumpyRandomState;
use llmbench_text::tokenizer::Tokenizer;

/// One kept row: its line in the file and its two lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    input_len: u32,
    output_len: u32,
}

/// `num_prompts` requests of `file`, sampled with `seed` (vLLM's `--seed`).
pub(super) fn burstgpt_prompts(
    file: &BurstGpt,
    tokenizer: &Tokenizer,
    seed: u64,
    num_prompts: usize,
) -> Result<Vec<Prompt>, PromptError> {
    let path = PathBuf::from(&file.path);
    let rows = read_rows(&path, &read_text(&path)?)?;
    let shape = |message: String| DataError::Shape {
        path: path.clone(),
        message,
    };
    // `RandomState(seed)` takes a seed in [0, 2^32 - 1] and raises ValueError otherwise.
    let seed = u32::try_from(seed).map_err(|_| {
        shape(format!(
            "the seed {seed} is outside numpy's RandomState range [0, 4294967295], which pandas samples the \
             rows with"
        ))
    })?;
    let mut rng = NumpyRandomState::seed(seed);
    let picked = if num_prompts <= rows.len() {
        rng.choice_without_replacement(rows.len(), num_prompts)
    } else {
        rng.choice_with_replacement(rows.len(), num_prompts)
    }
    .ok_or_else(|| {
        shape(format!(
            "{} GPT-4 rows with response tokens above 0: nothing to sample (vLLM keeps only those)",
            rows.len()
        ))
    })?;
    let vocab_size = tokenizer.base_vocab_size();
    if vocab_size == 0 {
        return Err(shape("the tokenizer has an empty vocabulary".to_owned()).into());
    }
    picked
        .iter()
        .enumerate()
        .map(|(i, &row)| {
            let row = rows[row];
            let ids: Vec<u32> = (0..row.input_len as usize)
                .map(|j| ((i + j) % vocab_size) as u32)
                .collect();
            let text = tokenizer
                .decode(&ids)
                .map_err(|source| DataError::Tokenize {
                    path: path.clone(),
                    row: format!("request {i}"),
                    source,
                })?;
            Ok(Prompt::text(text, row.input_len, Some(row.output_len)))
        })
        .collect()
}

/// The rows `BurstGPTDataset.load_data` keeps, in file order.
fn read_rows(path: &Path, text: &str) -> Result<Vec<Row>, DataError> {
    let csv_error = csv_error(path);
    let mut reader = csv_reader(text);
    let headers = reader.headers().map_err(csv_error)?.clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| DataError::Shape {
                path: path.to_owned(),
                message: format!(
                    "no `{name}` column: vLLM's burstgpt dataset keeps the rows whose `Model` is GPT-4 and \
                     whose `Response tokens` is above 0 (BurstGPT's header: Timestamp,Model,Request tokens,\
                     Response tokens,Total tokens,Log Type)"
                ),
            })
    };
    let model = column("Model")?;
    let response = column("Response tokens")?;
    if headers.len() < 4 {
        return Err(DataError::Shape {
            path: path.to_owned(),
            message: format!(
                "{} columns: vLLM reads each row's third and fourth values as its request and response tokens",
                headers.len()
            ),
        });
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_error)?;
        let line = record.position().map_or(0, csv::Position::line);
        let field = |index: usize, message: String| DataError::Field {
            path: path.to_owned(),
            row: format!("line {line}"),
            column: headers.get(index).unwrap_or_default().to_owned(),
            message,
        };
        let number = |index: usize| -> Result<f64, DataError> {
            let cell = record.get(index).unwrap_or_default().trim();
            cell.parse::<f64>()
                .map_err(|_| field(index, format!("`{cell}` is not a number")))
        };
        if record.get(model) != Some("GPT-4") || number(response)? <= 0.0 {
            continue;
        }
        // `int(data[i][2])`, `int(data[i][3])`: whole numbers; a negative or absurd length is no prompt.
        let length = |index: usize| -> Result<u32, DataError> {
            let value = number(index)?;
            if value.fract() != 0.0 || !(0.0..=MAX_TOKENS as f64).contains(&value) {
                return Err(field(
                    index,
                    format!("{value} is not a token count from 0 to {MAX_TOKENS}"),
                ));
            }
            Ok(value as u32)
        };
        rows.push(Row {
            input_len: length(2)?,
            output_len: length(3)?,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "\
Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,GPT-4,1087,0,1087,Conversation log
46,GPT-4,3,5,8,Conversation log
47,GPT-4,4,6,10,API log
48,ChatGPT,9,9,18,API log
49,GPT-4,2,7,9,Conversation log
";

    fn write(text: &str) -> (tempfile::TempDir, BurstGpt) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("burstgpt.csv");
        std::fs::write(&path, text).expect("write");
        let file = BurstGpt {
            path: path.to_string_lossy().into_owned(),
        };
        (dir, file)
    }

    #[test]
    fn only_gpt_4_rows_with_a_response_are_kept_in_file_order() {
        let rows = read_rows(Path::new("b.csv"), CSV).expect("rows");
        let lengths: Vec<(u32, u32)> = rows.iter().map(|r| (r.input_len, r.output_len)).collect();
        assert_eq!(lengths, [(3, 5), (4, 6), (2, 7)]);
    }

    #[test]
    fn rows_are_sampled_as_pandas_samples_them_and_each_prompt_is_its_offset_run_of_ids() {
        let (_dir, file) = write(CSV);
        let tokenizer = Tokenizer::builtin();
        // pandas: gpt4_df.sample(n=2, random_state=0) takes positions RandomState(0).permutation(3)[:2] = [2, 1]
        // (numpy 2.4.6): rows (2, 7) then (4, 6).
        let prompts = burstgpt_prompts(&file, &tokenizer, 0, 2).expect("prompts");
        let lengths: Vec<(u32, Option<u32>)> = prompts
            .iter()
            .map(|p| (p.input_tokens, p.max_tokens))
            .collect();
        assert_eq!(lengths, [(2, Some(7)), (4, Some(6))]);
        // Request i decodes ids i, i + 1, … (mod the vocabulary).
        let decode = |ids: &[u32]| tokenizer.decode(ids).expect("decode");
        assert_eq!(prompts[0].text, decode(&[0, 1]));
        assert_eq!(prompts[1].text, decode(&[1, 2, 3, 4]));
        // More prompts than rows: drawn with replacement, RandomState(0).choice(3, 5) = [0, 1, 0, 1, 1].
        let prompts = burstgpt_prompts(&file, &tokenizer, 0, 5).expect("prompts");
        let inputs: Vec<u32> = prompts.iter().map(|p| p.input_tokens).collect();
        assert_eq!(inputs, [3, 4, 3, 4, 4]);
    }

    #[test]
    fn a_file_vllm_cannot_read_is_refused_naming_the_line_and_column() {
        let e = read_rows(
            Path::new("b.csv"),
            "Timestamp,Model,Request tokens\n1,GPT-4,3\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("no `Response tokens` column"), "{e}");
        let e = read_rows(
            Path::new("b.csv"),
            "Timestamp,Model,Request tokens,Response tokens\n1,GPT-4,3.5,4\n",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("line 2, column `Request tokens`"),
            "{e}"
        );
        let (_dir, file) = write("Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,3,4\n");
        let e = burstgpt_prompts(&file, &Tokenizer::builtin(), 0, 1).unwrap_err();
        assert!(e.to_string().contains("0 GPT-4 rows"), "{e}");
        let (_dir, file) = write(CSV);
        let e = burstgpt_prompts(&file, &Tokenizer::builtin(), 1 << 32, 1).unwrap_err();
        assert!(
            e.to_string().contains("outside numpy's RandomState range"),
            "{e}"
        );
    }
}
