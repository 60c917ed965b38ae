//! The pool and requests of inference-perf's `visionarena` data, against the fixtures of
//! launcher/tests/fixtures/parquet (written by make-fixtures.py there).

use std::path::PathBuf;

use serde_json::json;

use super::*;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../launcher/tests/fixtures/parquet")
        .join(name)
        .display()
        .to_string()
}

fn data(path: &str) -> VisionArenaData {
    VisionArenaData {
        path: path.to_owned(),
        split: "train".to_owned(),
        num_rows: 1000,
        max_images_per_request: 1,
        insertion_point: ArenaPoint::At(0.0),
    }
}

/// An image as (format, width, height).
type Shown = (String, u32, u32);

/// (prompt, images) of each pool entry.
fn summary(pool: &[Entry]) -> Vec<(String, Vec<Shown>)> {
    pool.iter()
        .map(|entry| {
            let images = entry
                .images
                .iter()
                .map(|image| {
                    let format = image
                        .url
                        .strip_prefix("data:image/")
                        .and_then(|rest| rest.split_once(';'))
                        .map(|(f, _)| f.to_owned())
                        .unwrap_or_default();
                    let (w, h) = image.size.unwrap_or_default();
                    (format, w, h)
                })
                .collect();
            (entry.prompt.clone(), images)
        })
        .collect()
}

fn owned(prompt: &str, images: &[(&str, u32, u32)]) -> (String, Vec<Shown>) {
    (
        prompt.to_owned(),
        images
            .iter()
            .map(|(f, w, h)| ((*f).to_owned(), *w, *h))
            .collect(),
    )
}

/// By hand from `_build_pool` / `_row_to_entry` over the fixture's rows, files in path order: row 1 (no user
/// message) out; row 2's prompt is its second turn's (the first is blank: `" \t\x1c".strip()` is empty), its
/// images cut to `[:2]` = [GIF, PNG], the GIF skipped; row 3 its JPEG; row 4 (no images) out; file 2's row 1
/// its WEBP and first PNG (`[:2]`); row 2 (a PNG cut short, which `pil.load()` fails on) out; row 3 its PNG.
/// The test split's row is never read.
#[test]
fn the_pool_keeps_usable_rows_in_file_order_with_their_first_images() {
    let mut va = data(&fixture("visionarena-pool/data"));
    va.max_images_per_request = 2;
    let pool = pool(&va).expect("pool");
    assert_eq!(
        summary(&pool),
        [
            owned("second turn asks", &[("png", 20, 10)]),
            owned("héllo wörld, what is this?", &[("jpeg", 24, 16)]),
            owned("webp please", &[("webp", 30, 20), ("png", 8, 8)]),
            owned("the last row", &[("png", 12, 6)]),
        ]
    );
    // `max_images_per_request: 1`: row 2's `[:1]` is the GIF alone, so the row is left out.
    va.max_images_per_request = 1;
    assert_eq!(
        summary(&pool_of(&va)),
        [
            owned("héllo wörld, what is this?", &[("jpeg", 24, 16)]),
            owned("webp please", &[("webp", 30, 20)]),
            owned("the last row", &[("png", 12, 6)]),
        ]
    );
    // `num_rows: 2`: the first two usable rows; `hf_split: test` the other split.
    va.num_rows = 2;
    assert_eq!(pool_of(&va).len(), 2);
    va.split = "test".to_owned();
    assert_eq!(
        summary(&pool_of(&va)),
        [owned("never sent: the test split", &[("png", 3, 3)])]
    );
}

fn pool_of(va: &VisionArenaData) -> Vec<Entry> {
    pool(va).expect("pool")
}

/// The images go as stored: the data URL's payload is the stored bytes, base64-encoded.
#[test]
fn images_are_sent_as_the_bytes_stored() {
    let path = fixture("visionarena-pool/data/train-00001-of-00002.parquet");
    let rows = llmbench_data::parquet_rows(std::path::Path::new(&path)).expect("rows");
    let stored = rows[2]["images"][0]["bytes"].as_str().expect("bytes");
    let pool = pool_of(&data(&fixture("visionarena-pool/data")));
    let last = pool.last().expect("an entry");
    assert_eq!(
        last.images[0].url,
        format!("data:image/png;base64,{stored}")
    );
}

#[test]
fn a_split_nobody_can_use_is_an_empty_pool_and_decoded_images_are_refused() {
    // The JSON form of a row: its `bytes` are text, which `_process_image` does not take.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("train.jsonl"),
        json!({"conversation": [[{"role": "user", "content": "hi"}]], "images": [{"bytes": "iVBORw0KGgo=", "path": null}]})
            .to_string(),
    )
    .expect("write");
    let e = pool(&data(&dir.path().display().to_string()))
        .expect_err("empty")
        .to_string();
    assert!(e.contains("VisionArena pool is empty"), "{e}");

    let e = pool(&data(&fixture("visionarena-decoded/data")))
        .expect_err("decoded")
        .to_string();
    assert!(e.contains("re-encoded as a PNG"), "{e}");
}

#[test]
fn the_first_user_message_with_text_is_the_prompt() {
    // Nested turns, a flat list of messages, a non-text content skipped, a blank one skipped.
    let nested = json!([[{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]]);
    assert_eq!(first_user_prompt(&nested), Some("b"));
    let flat = json!([{"role": "user", "content": 5}, {"role": "user", "content": "\u{3000}"}, {"role": "user", "content": " c "}]);
    assert_eq!(first_user_prompt(&flat), Some(" c "));
    assert_eq!(first_user_prompt(&json!("user")), None);
    assert_eq!(
        first_user_prompt(&json!([[{"role": "user", "content": "\u{1f}"}]])),
        None
    );
}

/// `sample_insertion_point`: a number is every image's point; `null` draws `rng.uniform(0.0, 1.0)` per image from
/// `np.random.default_rng(data_index)` (numpy 2.4.6: default_rng(0) gives 0.6369616873214543 then
/// 0.2697867137638703, default_rng(3) 0.08564916714362436).
#[test]
fn insertion_points_are_the_number_or_drawn_from_the_request_index() {
    let image = ImageInput {
        size: Some((1, 1)),
        url: "data:image/png;base64,".to_owned(),
        place: None,
    };
    let entry = Entry {
        prompt: "p".to_owned(),
        images: vec![image.clone(), image.clone()],
    };
    let points = |entry: &Entry, point: ArenaPoint, index: u64| -> Vec<f64> {
        placed(entry, point, index)
            .iter()
            .map(|i| i.place.expect("placed").point)
            .collect()
    };
    assert_eq!(points(&entry, ArenaPoint::At(0.5), 7), [0.5, 0.5]);
    assert_eq!(
        points(&entry, ArenaPoint::Uniform, 0),
        [0.6369616873214543, 0.2697867137638703]
    );
    assert_eq!(
        points(&entry, ArenaPoint::Uniform, 3)[0],
        0.08564916714362436
    );
    // A `uniform` distribution: `rng.uniform(min, max + 1)`, clipped, `np.round`ed. Request 0 draws 1.2739… and
    // 0.5395… from uniform(0, 2): 1 and 1; request 3 draws 0.1712… and 0.4736…: 0 and 0. With min -3, max 5,
    // request 7's four images get 3, 5, 4, -1 (by upstream's `sample_insertion_point`, numpy 2.4.6).
    let zero_one = ArenaPoint::UniformInts { min: 0, max: 1 };
    assert_eq!(points(&entry, zero_one, 0), [1.0, 1.0]);
    assert_eq!(points(&entry, zero_one, 3), [0.0, 0.0]);
    let four = Entry {
        prompt: "p".to_owned(),
        images: vec![image; 4],
    };
    assert_eq!(
        points(&four, ArenaPoint::UniformInts { min: -3, max: 5 }, 7),
        [3.0, 5.0, 4.0, -1.0]
    );
}
