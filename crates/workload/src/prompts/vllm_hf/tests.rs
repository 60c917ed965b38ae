//! Expected orders come from numpy 2.4.6 and `datasets` 5.2.0 on the same files (`load_dataset(dir,
//! split=..., streaming=...).shuffle(seed=...)`); lengths are counted by hand with the built-in word tokenizer
//! (one token per word, no special tokens).

use super::*;

fn write(dir: &Path, name: &str, content: &str) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, content).expect("write");
}

fn hf(path: &Path, kind: HfDatasetKind) -> VllmHf {
    VllmHf {
        path: path.display().to_string(),
        kind,
        split: "train".to_owned(),
        output_len: None,
        streaming: true,
        shuffle: true,
        chat_template: false,
    }
}

/// `n` MT-Bench rows `{"turns": ["q<i>"]}`, one per line.
fn mt_bench_rows(range: std::ops::Range<usize>) -> String {
    range
        .map(|i| format!("{{\"turns\": [\"q{i}\", \"again\"]}}\n"))
        .collect()
}

fn texts(prompts: &[Prompt]) -> Vec<String> {
    prompts.iter().map(|p| p.text.clone()).collect()
}

fn relative(root: &Path, files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .map(|f| {
            f.strip_prefix(root)
                .expect("under root")
                .display()
                .to_string()
        })
        .collect()
}

#[test]
fn a_directorys_splits_are_found_by_datasets_default_patterns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    // Split words in file names: `train.jsonl` and `my-test.jsonl`; "attestation" holds "test" but not as a word.
    write(root, "train.jsonl", "{}\n");
    write(root, "my-test.jsonl", "{}\n");
    write(root, "attestation.jsonl", "{}\n");
    write(root, ".cache/train.jsonl", "{}\n");
    write(root, "README.md", "---\nlicense: mit\n---\n");
    assert_eq!(
        relative(root, &split_files(root, "train", VLLM_KEYS).expect("train")),
        ["train.jsonl"]
    );
    assert_eq!(
        relative(root, &split_files(root, "test", VLLM_KEYS).expect("test")),
        ["my-test.jsonl"]
    );
    let e = split_files(&root.join("org/name"), "train", VLLM_KEYS)
        .expect_err("a Hub id")
        .to_string();
    assert!(
        e.contains("from a local copy only") && e.contains("`hf-name: <id>`"),
        "{e}"
    );
    let e = split_files(root, "validation", VLLM_KEYS)
        .expect_err("no such split")
        .to_string();
    assert!(
        e.contains("Unknown split \"validation\"") && e.contains("['train', 'test']"),
        "{e}"
    );

    // No split word anywhere: every file is `train`, in path order.
    let plain = tempfile::tempdir().expect("tempdir");
    write(plain.path(), "b.jsonl", "{}\n");
    write(plain.path(), "a/part.json", "[]");
    assert_eq!(
        relative(
            plain.path(),
            &split_files(plain.path(), "train", VLLM_KEYS).expect("train")
        ),
        ["a/part.json", "b.jsonl"]
    );

    // Split words in directory names win over file names.
    let dirs = tempfile::tempdir().expect("tempdir");
    write(dirs.path(), "train/x.jsonl", "{}\n");
    write(dirs.path(), "dev_2024/test.jsonl", "{}\n");
    assert_eq!(
        relative(
            dirs.path(),
            &split_files(dirs.path(), "validation", VLLM_KEYS).expect("validation")
        ),
        ["dev_2024/test.jsonl"]
    );

    // The sharded layout of the Hub's converted datasets, before everything else.
    let sharded = tempfile::tempdir().expect("tempdir");
    write(sharded.path(), "data/train-00001-of-00002.jsonl", "{}\n");
    write(sharded.path(), "data/train-00000-of-00002.jsonl", "{}\n");
    write(sharded.path(), "data/test-00000-of-00001.jsonl", "{}\n");
    assert_eq!(
        relative(
            sharded.path(),
            &split_files(sharded.path(), "train", VLLM_KEYS).expect("train")
        ),
        [
            "data/train-00000-of-00002.jsonl",
            "data/train-00001-of-00002.jsonl"
        ]
    );
}

#[test]
fn csv_files_mixed_splits_and_dataset_card_configs_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "data/train-00000-of-00001.csv", "a\n1\n");
    let e = split_files(dir.path(), "train", VLLM_KEYS)
        .expect_err("csv")
        .to_string();
    assert!(e.contains("convert it to JSON lines"), "{e}");
    let mixed = tempfile::tempdir().expect("tempdir");
    write(mixed.path(), "data/train-00000-of-00002.jsonl", "{}\n");
    write(mixed.path(), "data/train-00001-of-00002.parquet", "PAR1");
    let e = split_files(mixed.path(), "train", VLLM_KEYS)
        .expect_err("mixed")
        .to_string();
    assert!(e.contains("one kind per split"), "{e}");
    let parquet = tempfile::tempdir().expect("tempdir");
    write(parquet.path(), "data/train-00000-of-00001.parquet", "PAR1");
    assert_eq!(
        split_files(parquet.path(), "train", VLLM_KEYS)
            .expect("parquet")
            .len(),
        1
    );

    let card = tempfile::tempdir().expect("tempdir");
    write(
        card.path(),
        "README.md",
        "---\nconfigs:\n- config_name: default\n---\n",
    );
    write(card.path(), "train.jsonl", "{}\n");
    let e = split_files(card.path(), "train", VLLM_KEYS)
        .expect_err("configs")
        .to_string();
    assert!(e.contains("`configs:`"), "{e}");
}

#[test]
fn rows_are_shuffled_as_datasets_shuffles_them_streamed_or_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "rows.jsonl", &mt_bench_rows(0..5));
    let tokenizer = Tokenizer::builtin();
    // default_rng(3).permutation(5) = [4, 2, 1, 3, 0]; one file, so streaming gives the same order.
    let mut spec = hf(dir.path(), HfDatasetKind::MtBench);
    for streaming in [true, false] {
        spec.streaming = streaming;
        let prompts = vllm_hf_prompts(&spec, &tokenizer, 3, 5).expect("prompts");
        assert_eq!(
            texts(&prompts),
            ["q4", "q2", "q1", "q3", "q0"],
            "streaming {streaming}"
        );
        // MTBenchDataset's default output length.
        assert!(prompts.iter().all(|p| p.max_tokens == Some(256)));
    }
    spec.shuffle = false;
    let prompts = vllm_hf_prompts(&spec, &tokenizer, 3, 2).expect("prompts");
    assert_eq!(texts(&prompts), ["q0", "q1"]);
}

#[test]
fn a_streamed_directory_shuffles_its_files_then_its_rows() {
    // Four files of three rows, seed 2: default_rng(2).shuffle([0, 1, 2, 3]) = [3, 2, 0, 1] orders the files
    // d, c, a, b; then default_rng(2).permutation(12) picks from that concatenation. datasets 5.2.0 streams
    // d2, d0, b0, b1, b2 first; without streaming the files stay a, b, c, d.
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["a", "b", "c", "d"] {
        let rows: String = (0..3)
            .map(|i| format!("{{\"turns\": [\"{name}{i}\"]}}\n"))
            .collect();
        write(dir.path(), &format!("{name}.jsonl"), &rows);
    }
    let tokenizer = Tokenizer::builtin();
    let spec = hf(dir.path(), HfDatasetKind::MtBench);
    let prompts = vllm_hf_prompts(&spec, &tokenizer, 2, 5).expect("prompts");
    assert_eq!(texts(&prompts), ["d2", "d0", "b0", "b1", "b2"]);
    let order = NumpyGenerator::seed(2).permutation(12);
    let names = ["a", "b", "c", "d"];
    let expected: Vec<String> = order
        .iter()
        .take(5)
        .map(|&i| format!("{}{}", names[i / 3], i % 3))
        .collect();
    let spec = VllmHf {
        streaming: false,
        ..spec
    };
    assert_eq!(
        texts(&vllm_hf_prompts(&spec, &tokenizer, 2, 5).expect("prompts")),
        expected
    );
}

#[test]
fn a_streamed_dataset_larger_than_the_buffer_yields_as_the_rolling_buffer_does() {
    // 1500 rows, seed 3: datasets 5.2.0 streams rows 334, 618, 590, 388, 679, 105, 797, 133 first (a
    // permutation of the first 1000 rows yields 500 of them and keeps 500), where `no-stream` gives
    // default_rng(3).permutation(1500): 500, 1442, 209, 558, 957, 814, 786, 608.
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "rows.jsonl", &mt_bench_rows(0..1500));
    let tokenizer = Tokenizer::builtin();
    let spec = hf(dir.path(), HfDatasetKind::MtBench);
    let streamed = vllm_hf_prompts(&spec, &tokenizer, 3, 8).expect("prompts");
    assert_eq!(
        texts(&streamed),
        [
            "q334", "q618", "q590", "q388", "q679", "q105", "q797", "q133"
        ]
    );
    let spec = VllmHf {
        streaming: false,
        ..spec
    };
    let loaded = vllm_hf_prompts(&spec, &tokenizer, 3, 8).expect("prompts");
    assert_eq!(
        texts(&loaded),
        [
            "q500", "q1442", "q209", "q558", "q957", "q814", "q786", "q608"
        ]
    );
}

#[test]
fn instructcoder_builds_its_prompt_from_input_and_instruction() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "train.json",
        r#"[{"input": "def f(): pass", "instruction": "Rename f to g.", "output": "def g(): pass"}]"#,
    );
    let spec = VllmHf {
        shuffle: false,
        ..hf(dir.path(), HfDatasetKind::InstructCoder)
    };
    let prompts = vllm_hf_prompts(&spec, &Tokenizer::builtin(), 0, 1).expect("prompts");
    let text =
        "def f(): pass\n\nRename f to g. Just output the code, do not include any explanation.";
    assert_eq!(texts(&prompts), [text]);
    // 3 + 3 + 10 words; InstructCoder's default output length is 200.
    assert_eq!(prompts[0].input_tokens, 16);
    assert_eq!(prompts[0].max_tokens, Some(200));
}

#[test]
fn aimo_asks_for_the_solutions_length_and_skips_what_vllm_skips() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "aime.jsonl",
        "{\"problem\": \"a b c d\", \"solution\": \"v w x y z\"}\n\
         {\"problem\": \"a b\", \"solution\": \"v w x y z\"}\n\
         {\"problem\": \"a b c d e\", \"solution\": \"v w x\"}\n\
         {\"problem\": \"p q r s t u\", \"solution\": \"one two three four\"}\n",
    );
    let spec = VllmHf {
        shuffle: false,
        ..hf(dir.path(), HfDatasetKind::Aimo)
    };
    let tokenizer = Tokenizer::builtin();
    // Rows 2 and 3 fail is_valid_sequence (a 2-token prompt, a 3-token answer: both under min_len 4).
    let prompts = vllm_hf_prompts(&spec, &tokenizer, 0, 2).expect("prompts");
    assert_eq!(texts(&prompts), ["a b c d", "p q r s t u"]);
    let lengths: Vec<(u32, Option<u32>)> = prompts
        .iter()
        .map(|p| (p.input_tokens, p.max_tokens))
        .collect();
    assert_eq!(lengths, [(4, Some(5)), (6, Some(4))]);
    // hf-output-len fixes every answer and turns the filter off.
    let fixed = VllmHf {
        output_len: Some(7),
        ..spec
    };
    let prompts = vllm_hf_prompts(&fixed, &tokenizer, 0, 4).expect("prompts");
    assert_eq!(
        texts(&prompts),
        ["a b c d", "a b", "a b c d e", "p q r s t u"]
    );
    assert!(prompts.iter().all(|p| p.max_tokens == Some(7)));
}

#[test]
fn too_few_rows_are_topped_up_with_pythons_random_choice() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "rows.jsonl", &mt_bench_rows(0..2));
    let spec = VllmHf {
        shuffle: false,
        ..hf(dir.path(), HfDatasetKind::MtBench)
    };
    // random.seed(0); [random.choice(rows) for _ in range(3)] picks rows 1, 1, 0.
    let prompts = vllm_hf_prompts(&spec, &Tokenizer::builtin(), 0, 5).expect("prompts");
    assert_eq!(texts(&prompts), ["q0", "q1", "q1", "q1", "q0"]);
}

#[test]
fn conversations_keep_rows_with_two_turns_and_refuse_images() {
    let dir = tempfile::tempdir().expect("tempdir");
    let turn = |v: &str| format!("{{\"from\": \"human\", \"value\": \"{v}\"}}");
    write(
        dir.path(),
        "train.jsonl",
        &format!(
            "{{\"conversations\": [{}]}}\n{{\"conversations\": [{}, {}]}}\n",
            turn("alone here"),
            turn("what is two plus two"),
            turn("it is four of course")
        ),
    );
    let spec = VllmHf {
        shuffle: false,
        ..hf(dir.path(), HfDatasetKind::Conversation)
    };
    let prompts = vllm_hf_prompts(&spec, &Tokenizer::builtin(), 0, 1).expect("prompts");
    assert_eq!(texts(&prompts), ["what is two plus two"]);
    // A 5-token prompt, and the 5-token answer's length as max_tokens.
    assert_eq!(
        (prompts[0].input_tokens, prompts[0].max_tokens),
        (5, Some(5))
    );

    write(
        dir.path(),
        "train.jsonl",
        &format!(
            "{{\"conversations\": [{}, {}], \"image\": \"a.png\"}}\n",
            turn("a"),
            turn("b")
        ),
    );
    let e = vllm_hf_prompts(&spec, &Tokenizer::builtin(), 0, 1)
        .expect_err("image")
        .to_string();
    assert!(e.contains("image") && e.contains("issue 32"), "{e}");
}
