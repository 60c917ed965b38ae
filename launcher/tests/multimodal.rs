//! Images in chat requests through the binary: vLLM's `random-mm` dataset (`RandomMultiModalDataset`,
//! vllm/benchmarks/datasets/random.py at vllm-project/vllm 237145e) sent as `_get_chat_content` puts it (the text
//! part, then one `image_url` part per image with a base64 JPEG data URL; lib/endpoint_request_func.py 3aee4a4);
//! vLLM's `sharegpt` with ShareGPT4V's `image` entries (datasets/sharegpt.py 237145e: `process_image` of a path,
//! a `file://` URL); AIPerf 0.13's `--image-*` flags (dataset/generator/image.py, endpoints/base_endpoint.py
//! `_render_turn_content`); and the input tokens the simulator reports for them (one per 28×28 tile begun).
//! Counts, sizes and values, never timings.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

use base64::Engine as _;
use serde_json::{Value, json};

use common::*;

/// Base 2 with range ratio 0.5: 1 to 3 images (the limit is 3), of 28×56 (width × height: 1·2 = 2 tokens in the
/// simulator) or 57×30 (3·2 = 6 tokens); the zero-weight video bucket is dropped as vLLM drops it. One request at
/// a time with a fixed seed, so two runs send the same requests in the same order.
const PROFILE: &str = "model: m\nbackend: openai-chat\nendpoint: /v1/chat/completions\ndataset-name: random-mm\n\
random-input-len: 8\nrandom-output-len: 3\nnum-prompts: 12\nmax-concurrency: 1\nseed: 5\n\
random-mm-base-items-per-request: 2\nrandom-mm-num-mm-items-range-ratio: 0.5\n\
random-mm-limit-mm-per-prompt: '{\"image\": 3, \"video\": 0}'\n\
random-mm-bucket-config: '{(56, 28, 1): 0.5, (30, 57, 1): 0.5, (720, 1280, 16): 0.0}'\n";

/// One streamed chat (or completions) chunk, a usage chunk and `[DONE]`.
fn streamed_answer(request: &WireRequest) -> String {
    streamed_text(request, "a b c", "length", 3)
}

fn bodies(seen: &Mutex<Vec<WireRequest>>) -> Vec<Value> {
    seen.lock()
        .expect("lock")
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON body"))
        .collect()
}

fn records(dir: &Path, run_id: &str) -> Vec<Value> {
    let mut records: Vec<Value> = common::requests_jsonl(&dir.join(run_id).join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    records.sort_by_key(|r| r["id"].as_u64());
    records
}

/// The width and height a baseline JPEG's SOF0 segment states, walking its segments from SOI.
fn jpeg_size(jpeg: &[u8]) -> (u32, u32) {
    assert_eq!(jpeg[..2], [0xFF, 0xD8], "starts with SOI");
    assert_eq!(jpeg[jpeg.len() - 2..], [0xFF, 0xD9], "ends with EOI");
    let mut at = 2;
    loop {
        assert_eq!(jpeg[at], 0xFF, "a marker at {at}");
        let length = usize::from(u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]));
        if jpeg[at + 1] == 0xC0 {
            let height = u16::from_be_bytes([jpeg[at + 5], jpeg[at + 6]]);
            let width = u16::from_be_bytes([jpeg[at + 7], jpeg[at + 8]]);
            return (u32::from(width), u32::from(height));
        }
        at += 2 + length;
    }
}

/// Each body's images as (width, height), read from the decoded JPEGs, after checking the message's shape.
fn images_sent(body: &Value) -> Vec<(u32, u32)> {
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    let parts = messages[0]["content"].as_array().expect("content parts");
    assert_eq!(parts[0]["type"], "text", "the text comes first");
    assert!(parts[0]["text"].as_str().is_some_and(|t| !t.is_empty()));
    parts[1..]
        .iter()
        .map(|part| {
            assert_eq!(part["type"], "image_url");
            let url = part["image_url"]["url"].as_str().expect("a url");
            let decode = |payload: &str| {
                base64::engine::general_purpose::STANDARD
                    .decode(payload)
                    .expect("base64")
            };
            if let Some(payload) = url.strip_prefix("data:image/png;base64,") {
                return png_size(&decode(payload));
            }
            let payload = url
                .strip_prefix("data:image/jpeg;base64,")
                .unwrap_or_else(|| panic!("a JPEG or PNG data URL: {}", &url[..40]));
            jpeg_size(&decode(payload))
        })
        .collect()
}

/// Each record's prompt tokens as llmbench counted them and as the server reported them.
fn counted_and_served(dir: &Path, run_id: &str) -> Vec<(u64, u64)> {
    records(dir, run_id)
        .iter()
        .map(|r| {
            (
                r["input_tokens"].as_u64().expect("input_tokens"),
                r["usage"]["prompt_tokens"].as_u64().expect("prompt_tokens"),
            )
        })
        .collect()
}

/// A PNG's width and height from its IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(
        png[..8],
        [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A],
        "PNG signature"
    );
    assert_eq!(&png[12..16], b"IHDR");
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be32(&png[16..20]), be32(&png[20..24]))
}

fn simulator_tokens((width, height): (u32, u32)) -> u64 {
    u64::from(width.div_ceil(28) * height.div_ceil(28))
}

#[test]
fn vllm_random_mm_sends_drawn_jpegs_after_the_text_and_the_simulator_counts_their_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(dir.path(), "mm.yaml", PROFILE);

    // What is sent: every request's images, decoded.
    let (url, seen) = capturing_server(streamed_answer);
    let output = run_against(
        "vllm-benchmark",
        &profile,
        &url,
        "builtin",
        dir.path(),
        "wire",
    );
    succeeded(&output);
    let bodies = bodies(&seen);
    assert_eq!(bodies.len(), 12);
    let sent: Vec<Vec<(u32, u32)>> = bodies.iter().map(images_sent).collect();
    let counts: BTreeSet<usize> = sent.iter().map(Vec::len).collect();
    assert!(
        counts.iter().all(|n| (1..=3).contains(n)),
        "counts in [floor(2·0.5), min(3, ceil(2·1.5))]: {sent:?}"
    );
    assert!(counts.len() > 1, "counts vary: {sent:?}");
    let sizes: BTreeSet<(u32, u32)> = sent.iter().flatten().copied().collect();
    assert_eq!(
        sizes,
        BTreeSet::from([(28, 56), (57, 30)]),
        "(height, width) buckets become width × height images"
    );
    for body in &bodies {
        assert_eq!(body["max_completion_tokens"], 3);
        assert_eq!(body["stream"], true);
    }

    // What is measured: the same requests against the simulator, whose prompt_tokens add the images' tokens to
    // the text's; the record's own input_tokens are the text's (vLLM's prompt_len).
    let sim = SimProcess::start(&["--model", "m", "--ttft", "1ms", "--itl", "1ms"]);
    let output = run_on_sim(dir.path(), "vllm-benchmark", &profile, "sim", &sim);
    succeeded(&output);
    let records = records(dir.path(), "sim");
    assert_eq!(records.len(), 12);
    for (record, images) in records.iter().zip(&sent) {
        let text = record["input_tokens"].as_u64().expect("input_tokens");
        assert_eq!(text, 8, "{record}");
        let image_tokens: u64 = images.iter().copied().map(simulator_tokens).sum();
        assert_eq!(
            record["usage"]["prompt_tokens"].as_u64(),
            Some(text + image_tokens),
            "{images:?}: {record}"
        );
    }
}

#[test]
fn random_mm_with_a_completions_backend_is_refused_before_anything_is_sent() {
    let (url, seen) = capturing_server(streamed_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "mm.yaml",
        "model: m\ndataset-name: random-mm\nnum-prompts: 2\n",
    );
    let output = run_against("vllm-benchmark", &profile, &url, "builtin", dir.path(), "r");
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("mm.yaml:2: `dataset-name`: the `random-mm` dataset sends images in chat messages, which backend `openai` does not send"),
        "{err}"
    );
    assert!(seen.lock().expect("lock").is_empty());
}

#[test]
fn aiperf_image_flags_send_images_of_the_drawn_format_after_the_text_and_the_simulator_counts_them()
{
    let dir = tempfile::tempdir().expect("tempdir");
    // Two 40×30 images a request (no stddev: every image that size), PNG or JPEG at random: the simulator counts
    // ceil(40/28)·ceil(30/28) = 2·2 = 4 tokens each.
    let profile = write(
        dir.path(),
        "images.yaml",
        "model: m\nendpoint-type: chat\nstreaming: none\nrequest-count: 8\nisl: 6\nosl: 2\nrandom-seed: 3\n\
         image-batch-size: 2\nimage-width-mean: 40\nimage-height-mean: 30\nimage-format: random\n",
    );
    let (url, seen) = capturing_server(streamed_answer);
    let output = run_against("aiperf", &profile, &url, "builtin", dir.path(), "wire");
    succeeded(&output);
    let bodies = bodies(&seen);
    assert_eq!(bodies.len(), 8);
    let mut formats = BTreeSet::new();
    for body in &bodies {
        assert_eq!(
            images_sent(body),
            vec![(40, 30), (40, 30)],
            "{}",
            body["messages"][0]["content"][0]
        );
        for part in body["messages"][0]["content"].as_array().expect("parts")[1..].iter() {
            let url = part["image_url"]["url"].as_str().expect("url");
            formats.insert(url[..url.find(';').expect("a media type")].to_owned());
        }
    }
    assert_eq!(
        formats,
        BTreeSet::from(["data:image/jpeg".to_owned(), "data:image/png".to_owned()]),
        "`image-format: random` draws both"
    );

    let sim = SimProcess::start(&["--model", "m", "--ttft", "1ms", "--itl", "1ms"]);
    let output = run_on_sim(dir.path(), "aiperf", &profile, "sim", &sim);
    succeeded(&output);
    let records = records(dir.path(), "sim");
    assert_eq!(records.len(), 8);
    for record in &records {
        let text = record["input_tokens"].as_u64().expect("input_tokens");
        assert_eq!(text, 6, "{record}");
        assert_eq!(
            record["usage"]["prompt_tokens"].as_u64(),
            Some(text + 8),
            "{record}"
        );
    }
}

#[test]
fn vllm_sharegpt_sends_each_entrys_image_as_a_file_url_to_chat_and_none_to_completions() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two images on disk: 56×28 (the simulator counts 2·1 = 2 tokens) and 100×50 (4·2 = 8).
    let small = dir.path().join("small.jpg");
    let large = dir.path().join("large.jpg");
    std::fs::write(&small, llmbench_data::image::noise_jpeg(56, 28, 1)).expect("write");
    std::fs::write(&large, llmbench_data::image::noise_jpeg(100, 50, 2)).expect("write");
    let entry = |prompt: &str, image: Option<&Path>| {
        let mut entry = json!({"conversations": [
            {"from": "human", "value": prompt}, {"from": "gpt", "value": "one two three four five"}]});
        if let Some(image) = image {
            entry["image"] = json!(image.display().to_string());
        }
        entry
    };
    let data = json!([
        entry("what is in this picture", Some(&small)),
        entry("describe the scene in words", None),
        entry("count the things you see here", Some(&large)),
    ]);
    let data_path = write(dir.path(), "sharegpt4v.json", &data.to_string());
    let profile = |backend: &str, endpoint: &str| {
        format!(
            "model: m\nbackend: {backend}\nendpoint: {endpoint}\ndataset-name: sharegpt\ndataset-path: {}\n\
             sharegpt-output-len: 3\nnum-prompts: 3\nmax-concurrency: 1\ndisable-shuffle: none\n",
            data_path.display()
        )
    };
    let chat = write(
        dir.path(),
        "chat.yaml",
        &profile("openai-chat", "/v1/chat/completions"),
    );
    let (url, seen) = capturing_server(streamed_answer);
    let output = run_against("vllm-benchmark", &chat, &url, "builtin", dir.path(), "wire");
    succeeded(&output);
    let contents: Vec<Value> = bodies(&seen)
        .iter()
        .map(|b| b["messages"][0]["content"].clone())
        .collect();
    assert_eq!(
        contents,
        vec![
            json!([{"type": "text", "text": "what is in this picture"},
                   {"type": "image_url", "image_url": {"url": format!("file://{}", small.display())}}]),
            json!([{"type": "text", "text": "describe the scene in words"}]),
            json!([{"type": "text", "text": "count the things you see here"},
                   {"type": "image_url", "image_url": {"url": format!("file://{}", large.display())}}]),
        ]
    );

    // The simulator reads each file's header, as vLLM reads a local image under --allowed-local-media-path.
    let sim = SimProcess::start(&["--model", "m", "--ttft", "1ms", "--itl", "1ms"]);
    let output = run_on_sim(dir.path(), "vllm-benchmark", &chat, "sim", &sim);
    succeeded(&output);
    let tokens = counted_and_served(dir.path(), "sim");
    assert_eq!(tokens, vec![(5, 5 + 2), (5, 5), (6, 6 + 8)]);

    // vLLM's completions request function reads no multimodal content: the prompt alone.
    let completions = write(
        dir.path(),
        "completions.yaml",
        &profile("openai", "/v1/completions"),
    );
    let (url, seen) = capturing_server(streamed_answer);
    let output = run_against(
        "vllm-benchmark",
        &completions,
        &url,
        "builtin",
        dir.path(),
        "text",
    );
    succeeded(&output);
    let prompts: Vec<Value> = bodies(&seen).iter().map(|b| b["prompt"].clone()).collect();
    assert_eq!(prompts.len(), 3);
    assert!(prompts.iter().all(Value::is_string), "{prompts:?}");
}

#[test]
fn vllm_custom_mm_sends_each_records_first_image_file_in_pythons_shuffled_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 56×28 (the simulator counts 2·1 = 2 tokens) and 100×50 (4·2 = 8).
    let small = dir.path().join("small.jpg");
    let large = dir.path().join("large.jpg");
    std::fs::write(&small, llmbench_data::image::noise_jpeg(56, 28, 1)).expect("write");
    std::fs::write(&large, llmbench_data::image::noise_jpeg(100, 50, 2)).expect("write");
    let (small_path, large_path) = (small.display().to_string(), large.display().to_string());
    let data = [
        json!({"prompt": "what is in this picture", "image_files": [small_path, large_path]}),
        json!({"prompt": "describe the scene in words", "image_files": [large_path]}),
        json!({"prompt": "count the things you see here", "image_files": [small_path]}),
    ]
    .iter()
    .map(|r| r.to_string() + "\n")
    .collect::<String>();
    let data_path = write(dir.path(), "mm.jsonl", &data);
    let profile = write(
        dir.path(),
        "custom_mm.yaml",
        &format!(
            "model: m\nbackend: openai-chat\nendpoint: /v1/chat/completions\ndataset-name: custom_mm\n\
             dataset-path: {}\ncustom-output-len: 3\nnum-prompts: 4\nmax-concurrency: 1\n",
            data_path.display()
        ),
    );
    let (url, seen) = capturing_server(streamed_answer);
    let output = run_against(
        "vllm-benchmark",
        &profile,
        &url,
        "builtin",
        dir.path(),
        "wire",
    );
    succeeded(&output);
    // CustomDataset.load_data: random.seed(0) (get_samples passes no seed); random.shuffle([r0, r1, r2]) → r0, r2,
    // r1; maybe_oversample_requests: random.seed(0); random.choice → r2. Each prompt as it is, then
    // process_image(image_files[0]) as a file:// URL.
    let part = |text: &str, image: &Path| {
        json!([{"type": "text", "text": text},
               {"type": "image_url", "image_url": {"url": format!("file://{}", image.display())}}])
    };
    let contents: Vec<Value> = bodies(&seen)
        .iter()
        .map(|b| b["messages"][0]["content"].clone())
        .collect();
    assert_eq!(
        contents,
        vec![
            part("what is in this picture", &small),
            part("count the things you see here", &small),
            part("describe the scene in words", &large),
            part("count the things you see here", &small),
        ]
    );
    assert!(
        bodies(&seen)
            .iter()
            .all(|b| b["max_completion_tokens"] == 3)
    );

    let sim = SimProcess::start(&["--model", "m", "--ttft", "1ms", "--itl", "1ms"]);
    let output = run_on_sim(dir.path(), "vllm-benchmark", &profile, "sim", &sim);
    succeeded(&output);
    let tokens = counted_and_served(dir.path(), "sim");
    assert_eq!(tokens, vec![(5, 7), (6, 8), (5, 13), (6, 8)]);

    // Images go only in chat messages: vLLM refuses the dataset with another backend.
    let completions = write(
        dir.path(),
        "completions.yaml",
        &format!(
            "model: m\nbackend: openai\ndataset-name: custom_mm\ndataset-path: {}\nnum-prompts: 2\n",
            data_path.display()
        ),
    );
    let output = run_against(
        "vllm-benchmark",
        &completions,
        &url,
        "builtin",
        dir.path(),
        "no",
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("`custom_mm` dataset sends images"),
        "{}",
        stderr(&output)
    );
}

/// inference-perf's woven images (`_build_user_content` / `assemble_content`, inference_perf/apis/chat.py at
/// kubernetes-sigs/inference-perf 7de5ef2): each user message's content parts, an image as its PNG's size.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Image((u32, u32), String),
}

fn woven_parts(body: &Value) -> Vec<Part> {
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    messages[0]["content"]
        .as_array()
        .expect("content parts")
        .iter()
        .map(|part| match part["type"].as_str() {
            Some("text") => Part::Text(part["text"].as_str().expect("text").to_owned()),
            Some("image_url") => {
                let url = part["image_url"]["url"].as_str().expect("a url");
                let payload = url
                    .strip_prefix("data:image/png;base64,")
                    .expect("inference-perf sends PNG data URLs by default");
                let png = base64::engine::general_purpose::STANDARD
                    .decode(payload)
                    .expect("base64");
                Part::Image(png_size(&png), url.to_owned())
            }
            other => panic!("unexpected part {other:?}"),
        })
        .collect()
}

/// The bundled guide_multimodal-serving_1, shrunk: 2 groups of 2 prompts, 6-token prefixes, 5-token
/// questions, 3-token answers, each of its 8 stages 1 s at 2 requests per second with no pause between them.
fn shrunk_guide_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    for o in [
        "num_groups=2",
        "num_prompts_per_group=2",
        "system_prompt_len=6",
        "question_len=5",
        "output_len=3",
        "duration=1",
        "rate=2",
        "interval=0",
    ] {
        args.extend(["--override".to_owned(), o.to_owned()]);
    }
    args
}

/// Each request of the guide carries the group's four 720p images (1280 × 720 in the PNG's IHDR), all before
/// the one text part (`insertion_point: 0.0` cuts the prefix at int(0 · len) = 0), the same four in every request
/// of a group; against the simulator each image adds ceil(1280/28) · ceil(720/28) = 46 · 26 = 1196 tokens.
#[test]
fn the_inference_perf_multimodal_guide_sends_four_720p_images_before_each_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, seen) = capturing_server(streamed_answer);
    let args = shrunk_guide_args(&[
        "--endpoint",
        &url,
        "--model",
        "m",
        "--tokenizer",
        "builtin",
        "--no-preflight",
        "--no-server-metrics",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "guide_multimodal-serving_1",
        "wire",
        &args,
    );
    succeeded(&output);
    let bodies = bodies(&seen);
    assert!(bodies.len() >= 8, "{} requests", bodies.len());
    let mut groups: BTreeSet<Vec<String>> = BTreeSet::new();
    for body in &bodies {
        let parts = woven_parts(body);
        assert_eq!(parts.len(), 5, "{parts:?}");
        let mut urls = Vec::new();
        for part in &parts[..4] {
            let Part::Image(size, url) = part else {
                panic!("four images first: {parts:?}")
            };
            assert_eq!(*size, (1280, 720));
            urls.push(url.clone());
        }
        let Part::Text(text) = &parts[4] else {
            panic!("then the text: {parts:?}")
        };
        assert!(!text.is_empty());
        assert_eq!(
            urls.iter().collect::<BTreeSet<_>>().len(),
            4,
            "each of a group's images has its own colour"
        );
        groups.insert(urls);
        assert_eq!(body["stream"], true);
    }
    assert_eq!(
        groups.len(),
        2,
        "two groups, each sending the same four images in every request"
    );

    let sim_args = shrunk_guide_args(&["--sim-ttft", "1ms", "--sim-itl", "1ms"]);
    let sim_args: Vec<&str> = sim_args.iter().map(String::as_str).collect();
    let output = run_profile(
        dir.path(),
        "inference-perf",
        "guide_multimodal-serving_1",
        "sim",
        &sim_args,
    );
    succeeded(&output);
    let records = records(dir.path(), "sim");
    assert!(records.len() >= 8, "{} records", records.len());
    for record in &records {
        let prompt_tokens = record["usage"]["prompt_tokens"]
            .as_u64()
            .expect("prompt_tokens");
        // The text's 6 + 5 tokens (the built-in tokenizer adds no special token) and 4 × 1196 for the images.
        assert_eq!(
            prompt_tokens,
            11 + 4 * simulator_tokens((1280, 720)),
            "{record}"
        );
        // The record keeps each image's size and encoded bytes (inference-perf's `Image` metrics).
        let images = record["images"].as_array().expect("images");
        assert_eq!(images.len(), 4, "{record}");
        assert!(
            images
                .iter()
                .all(|i| i["width"] == 1280 && i["height"] == 720 && i["bytes"].as_u64() > Some(0))
        );
    }
    // inference-perf's image figures: 4 a request, 1280 · 720 pixels, 16:9, so 4 images a request per second.
    let lifecycle: Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.path()
                .join("sim")
                .join("summary_lifecycle_metrics.json"),
        )
        .expect("summary_lifecycle_metrics.json"),
    )
    .expect("json");
    let successes = &lifecycle["successes"];
    let image = &successes["image"];
    assert_eq!(image["count"]["mean"], 4.0, "{image}");
    assert_eq!(image["pixels"]["max"], 921_600.0, "{image}");
    assert_eq!(image["aspect_ratio"]["min"], 1280.0 / 720.0, "{image}");
    let bytes_sent: Vec<u64> = records
        .iter()
        .flat_map(|r| r["images"].as_array().cloned().unwrap_or_default())
        .map(|i| i["bytes"].as_u64().expect("bytes"))
        .collect();
    assert_eq!(
        image["bytes"]["max"],
        *bytes_sent.iter().max().expect("images") as f64
    );
    let throughput = &successes["throughput"];
    let (images, requests) = (
        throughput["images_per_sec"]
            .as_f64()
            .expect("images_per_sec"),
        throughput["requests_per_sec"]
            .as_f64()
            .expect("requests_per_sec"),
    );
    assert!(
        (images - 4.0 * requests).abs() < 1e-9 * images,
        "{throughput}"
    );
    assert_eq!(successes["video"]["count"]["max"], 0.0);
    assert!(successes["audio"]["seconds"].is_null());
}

/// A prefix image at 1.0 and a question image at 0.5: by hand from `_build_user_content`, the prefix's text then
/// its image, a lone " " part (the prefix ends in an image), the question's first int(0.5 · len(question))
/// characters, its image, the rest; 360p is 640 × 360, the explicit size 30 × 20.
#[test]
fn inference_perf_weaves_prefix_and_question_images_at_their_insertion_points() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "woven.yaml",
        "server: {type: vllm, base_url: http://x, model_name: m, ignore_eos: true}\n\
         api: {type: chat, streaming: true}\n\
         data:\n  type: shared_prefix\n  shared_prefix:\n    num_groups: 1\n    num_prompts_per_group: 3\n    \
         system_prompt_len: 8\n    question_len: 6\n    output_len: 3\n    multimodal:\n      image:\n        \
         count: {type: fixed, mean: 1}\n        insertion_point: 1.0\n        resolutions: 360p\n  \
         multimodal:\n    image:\n      count: {type: fixed, mean: 1}\n      insertion_point: 0.5\n      \
         resolutions: [{resolution: {width: 30, height: 20}, weight: 2}]\n\
         load:\n  type: concurrent\n  stages:\n    - {concurrency_level: 1, num_requests: 3}\n",
    );
    let (url, seen) = capturing_server(streamed_answer);
    let output = run_against("inference-perf", &profile, &url, "builtin", dir.path(), "w");
    succeeded(&output);
    let bodies = bodies(&seen);
    assert_eq!(bodies.len(), 3);
    let mut prefixes = BTreeSet::new();
    let mut prefix_images = BTreeSet::new();
    for body in &bodies {
        let parts = woven_parts(body);
        let [
            Part::Text(prefix),
            Part::Image(prefix_size, prefix_url),
            Part::Text(space),
            Part::Text(head),
            Part::Image(question_size, _),
            Part::Text(tail),
        ] = parts.as_slice()
        else {
            panic!("prefix, image, space, question head, image, tail: {parts:?}")
        };
        assert_eq!(space, " ");
        assert_eq!((*prefix_size, *question_size), ((640, 360), (30, 20)));
        let question_chars = head.chars().count() + tail.chars().count();
        assert_eq!(
            head.chars().count(),
            question_chars / 2,
            "{head:?} | {tail:?}"
        );
        prefixes.insert(prefix.clone());
        prefix_images.insert(prefix_url.clone());
    }
    assert_eq!(prefixes.len(), 1, "one group: one prefix");
    assert_eq!(prefix_images.len(), 1, "one group: the same prefix image");
}

/// vLLM's `hf` dataset with VisionArena-Chat's layout (`VisionArenaDataset`), from a local Parquet split: each row's
/// `conversation[0][0]["content"]` then its first image (the second row's second is not sent), 128 tokens unless
/// `hf-output-len`; the images go as stored (PNG here), their size read from the header.
#[test]
fn vllm_visionarena_sends_each_rows_first_message_and_first_stored_image() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parquet/visionarena");
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "visionarena.yaml",
        &format!(
            "model: m\nbackend: openai-chat\nendpoint: /v1/chat/completions\ndataset-name: hf\ndataset-path: {}\n\
             hf-name: lmarena-ai/VisionArena-Chat\nhf-output-len: 3\nnum-prompts: 2\ndisable-shuffle: true\n\
             max-concurrency: 1\n",
            data.display()
        ),
    );
    let (url, seen) = capturing_server(streamed_answer);
    let output = run_against(
        "vllm-benchmark",
        &profile,
        &url,
        "builtin",
        dir.path(),
        "wire",
    );
    succeeded(&output);
    let bodies = bodies(&seen);
    let texts: Vec<&str> = bodies
        .iter()
        .map(|b| {
            b["messages"][0]["content"][0]["text"]
                .as_str()
                .expect("text")
        })
        .collect();
    assert_eq!(
        texts,
        ["what is in this picture", "describe the scene in words"]
    );
    let sizes: Vec<Vec<(u32, u32)>> = bodies.iter().map(images_sent).collect();
    assert_eq!(sizes, [vec![(56, 28)], vec![(100, 50)]]);
    assert!(bodies.iter().all(|b| b["max_completion_tokens"] == 3));

    // Against the simulator: 5 words of text, and 2·1 = 2 and 4·2 = 8 tokens for the images.
    let sim = SimProcess::start(&["--model", "m", "--ttft", "1ms", "--itl", "1ms"]);
    let output = run_on_sim(dir.path(), "vllm-benchmark", &profile, "sim", &sim);
    succeeded(&output);
    assert_eq!(counted_and_served(dir.path(), "sim"), [(5, 7), (5, 13)]);

    // The multimodal classes run on the chat backend only, as vLLM demands.
    let completions = write(
        dir.path(),
        "completions.yaml",
        &format!(
            "model: m\nbackend: openai\ndataset-name: hf\ndataset-path: {}\nhf-name: lmarena-ai/VisionArena-Chat\n\
             num-prompts: 2\n",
            data.display()
        ),
    );
    let output = run_against(
        "vllm-benchmark",
        &completions,
        &url,
        "builtin",
        dir.path(),
        "no",
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("sends images"),
        "{}",
        stderr(&output)
    );
}

/// One request's content parts as (text) or (format, width, height, stored bytes) of an image.
#[derive(Debug, Clone, PartialEq)]
enum Stored {
    Text(String),
    Image(String, (u32, u32), Vec<u8>),
}

fn stored_parts(body: &Value) -> Vec<Stored> {
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "{messages:?}");
    messages[0]["content"]
        .as_array()
        .expect("content parts")
        .iter()
        .map(|part| match part["type"].as_str() {
            Some("text") => Stored::Text(part["text"].as_str().expect("text").to_owned()),
            Some("image_url") => {
                let url = part["image_url"]["url"].as_str().expect("a url");
                let (mime, payload) = url
                    .strip_prefix("data:image/")
                    .and_then(|rest| rest.split_once(";base64,"))
                    .expect("a base64 data URL");
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(payload)
                    .expect("base64");
                let size = llmbench_data::image::data_url_image_size(url).expect("a size");
                Stored::Image(mime.to_owned(), size, bytes)
            }
            other => panic!("unexpected part {other:?}"),
        })
        .collect()
}

/// inference-perf's `visionarena` data from a local copy (tests/fixtures/parquet/visionarena-pool, written by
/// make-fixtures.py): by hand from `VisionArenaDataGenerator` (datagen/dataset/visionarena_datagen.py at
/// kubernetes-sigs/inference-perf 7de5ef2), and checked against it run on the same files with `datasets` 4: with
/// `num_rows: 3` and `max_images_per_request: 2` the pool is file 1's rows 2 (its second turn's prompt, its PNG
/// after a skipped GIF) and 3 (a JPEG), then file 2's row 1 (a WEBP and a PNG of its three images). Request `i`
/// of a stage sends entry `i % 3`, each stage counting from 0 (`get_data` starts again): 0, 1, 2, 0, then 0, 1.
/// At `insertion_point: 0.5` the images cut the prompt at int(0.5 · len) characters: 16 → 8, 26 → 13, 11 → 5.
/// The images go as stored, with their MIME type; `max_tokens` is the client's default, 30.
#[test]
fn inference_perf_visionarena_sends_the_pool_in_order_with_the_images_as_stored() {
    let data =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parquet/visionarena-pool/data");
    let stored = |file: &str, row: usize, image: usize| -> Vec<u8> {
        let rows = llmbench_data::parquet_rows(&data.join(file)).expect("rows");
        let text = rows[row]["images"][image]["bytes"].as_str().expect("bytes");
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64")
    };
    let first = "train-00000-of-00002.parquet";
    let second = "train-00001-of-00002.parquet";
    let text = |t: &str| Stored::Text(t.to_owned());
    let image =
        |mime: &str, size: (u32, u32), bytes: Vec<u8>| Stored::Image(mime.to_owned(), size, bytes);
    let entries = [
        vec![
            text("second t"),
            image("png", (20, 10), stored(first, 1, 1)),
            text("urn asks"),
        ],
        vec![
            text("héllo wörld, "),
            image("jpeg", (24, 16), stored(first, 2, 0)),
            text("what is this?"),
        ],
        vec![
            text("webp "),
            image("webp", (30, 20), stored(second, 0, 0)),
            image("png", (8, 8), stored(second, 0, 1)),
            text("please"),
        ],
    ];

    let dir = tempfile::tempdir().expect("tempdir");
    let profile = write(
        dir.path(),
        "visionarena.yaml",
        &format!(
            "server: {{type: vllm, base_url: http://x, model_name: m, ignore_eos: true}}\n\
             api: {{type: chat, streaming: true}}\n\
             data:\n  type: visionarena\n  visionarena:\n    hf_dataset_name: {}\n    num_rows: 3\n    \
             max_images_per_request: 2\n    insertion_point: 0.5\n\
             load:\n  type: concurrent\n  stages:\n    - {{concurrency_level: 1, num_requests: 4}}\n    \
             - {{concurrency_level: 1, num_requests: 2}}\n",
            data.display()
        ),
    );
    // The 30 tokens asked, as the client's default `max_tokens` asks.
    let (url, seen) =
        capturing_server(|request| streamed_text(request, &["t"; 30].join(" "), "length", 30));
    let output = run_against(
        "inference-perf",
        &profile,
        &url,
        "builtin",
        dir.path(),
        "wire",
    );
    succeeded(&output);
    let sent_bodies = bodies(&seen);
    let sent: Vec<Vec<Stored>> = sent_bodies.iter().map(stored_parts).collect();
    let expected: Vec<Vec<Stored>> = [0, 1, 2, 0, 0, 1]
        .iter()
        .map(|&i| entries[i].clone())
        .collect();
    assert_eq!(sent, expected);
    assert!(
        sent_bodies.iter().all(|b| b["max_tokens"] == 30),
        "{sent_bodies:?}"
    );

    // Against the simulator, which reads each image's size: the records keep each image's size and stored bytes,
    // and the lifecycle report has inference-perf's image figures over the 6 requests' 7 images.
    let sim = SimProcess::start(&["--model", "m", "--ttft", "1ms", "--itl", "1ms"]);
    let output = run_on_sim(dir.path(), "inference-perf", &profile, "sim", &sim);
    succeeded(&output);
    let records = records(dir.path(), "sim");
    assert_eq!(records.len(), 6);
    let images: Vec<Vec<(u64, u64, u64)>> = records
        .iter()
        .map(|r| {
            r["images"]
                .as_array()
                .expect("images")
                .iter()
                .map(|i| {
                    let n = |k: &str| i[k].as_u64().expect("a number");
                    (n("width"), n("height"), n("bytes"))
                })
                .collect()
        })
        .collect();
    let sizes = |entry: &[Stored]| -> Vec<(u64, u64, u64)> {
        entry
            .iter()
            .filter_map(|part| match part {
                Stored::Image(_, (w, h), bytes) => {
                    Some((u64::from(*w), u64::from(*h), bytes.len() as u64))
                }
                Stored::Text(_) => None,
            })
            .collect()
    };
    let mut expected: Vec<Vec<(u64, u64, u64)>> = [0, 1, 2, 0, 0, 1]
        .iter()
        .map(|&i| sizes(&entries[i]))
        .collect();
    let mut images = images;
    // Records are written as requests finish; one at a time, but compare as sets of requests all the same.
    images.sort();
    expected.sort();
    assert_eq!(images, expected);
    let lifecycle: Value = serde_json::from_str(
        &std::fs::read_to_string(
            dir.path()
                .join("sim")
                .join("summary_lifecycle_metrics.json"),
        )
        .expect("summary_lifecycle_metrics.json"),
    )
    .expect("json");
    let image = &lifecycle["successes"]["image"];
    assert_eq!(image["count"]["mean"], 7.0 / 6.0, "{image}");
    assert_eq!(image["pixels"]["max"], 600.0, "{image}");
    assert_eq!(image["pixels"]["min"], 64.0, "{image}");
    assert_eq!(image["aspect_ratio"]["max"], 2.0, "{image}");
    assert_eq!(image["aspect_ratio"]["min"], 1.0, "{image}");
    let all_bytes: Vec<u64> = expected.iter().flatten().map(|i| i.2).collect();
    assert_eq!(
        image["bytes"]["max"],
        *all_bytes.iter().max().expect("bytes") as f64
    );
    assert_eq!(
        image["bytes"]["min"],
        *all_bytes.iter().min().expect("bytes") as f64
    );

    // `insertion_point: null`: request i's points drawn from `np.random.default_rng(i).uniform(0, 1)`, one per
    // image; upstream's generator run on the same pool gives these parts (request 3 is entry 0 again, at
    // default_rng(3)'s 0.0856…: int(0.0856 · 16) = 1).
    let drawn = write(
        dir.path(),
        "drawn.yaml",
        &std::fs::read_to_string(&profile)
            .expect("profile")
            .replace("insertion_point: 0.5", "insertion_point: null")
            .replace("    - {concurrency_level: 1, num_requests: 2}\n", ""),
    );
    let start = seen.lock().expect("lock").len();
    let output = run_against(
        "inference-perf",
        &drawn,
        &url,
        "builtin",
        dir.path(),
        "drawn",
    );
    succeeded(&output);
    let shown: Vec<Vec<String>> = bodies(&seen)[start..]
        .iter()
        .map(|body| {
            stored_parts(body)
                .into_iter()
                .map(|part| match part {
                    Stored::Text(t) => t,
                    Stored::Image(mime, _, _) => format!("<{mime}>"),
                })
                .collect()
        })
        .collect();
    assert_eq!(
        shown,
        [
            vec!["second tur", "<png>", "n asks"],
            vec!["héllo wörld, ", "<jpeg>", "what is this?"],
            vec!["we", "<webp>", "b", "<png>", "p please"],
            vec!["s", "<png>", "econd turn asks"],
        ]
    );
}
