//! `llmbench plot` through the real binary: two short runs against the embedded simulator (one of a single stage,
//! one a guidellm sweep of several), each run's pictures and report.html, and a comparison of both; and a capacity
//! search's chart. Every PNG must decode at the size its SVG twin declares and weigh at most 200 KB, every SVG must
//! be well-formed XML, and the pages must name the run and load nothing from the network.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// Runs `llmbench plot ARGS…` and returns the files it says it wrote.
fn plot(args: &[&Path]) -> Vec<PathBuf> {
    let output = llmbench().arg("plot").args(args).output().expect("runs");
    succeeded(&output);
    stdout(&output)
        .lines()
        .filter_map(|line| line.strip_prefix("wrote "))
        .map(PathBuf::from)
        .collect()
}

/// The PNG's width and height, decoded.
fn png_size(path: &Path) -> (u32, u32) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut pixels = vec![0; reader.output_buffer_size()];
    reader
        .next_frame(&mut pixels)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let info = reader.info();
    (info.width, info.height)
}

/// The SVG's declared width and height, after checking it parses as XML with an `<svg>` root that has text.
fn svg_size(path: &Path) -> (u32, u32) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc =
        roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "{}", path.display());
    assert!(
        root.descendants().any(|n| n.has_tag_name("text")),
        "{} has no <text>",
        path.display()
    );
    let number = |name: &str| -> u32 {
        root.attribute(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{}: no {name}", path.display()))
    };
    (number("width"), number("height"))
}

/// The most a picture may weigh: a report of twenty of them stays a few megabytes, and each opens at once.
const MAX_PNG_BYTES: u64 = 200 * 1024;

/// Every written PNG has an SVG twin of the same size, both readable, and weighs at most [`MAX_PNG_BYTES`].
fn check_pictures(files: &[PathBuf]) {
    let pngs: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "png"))
        .collect();
    assert!(!pngs.is_empty(), "no PNG among {files:?}");
    for png in pngs {
        assert!(png.is_file(), "{} missing", png.display());
        let svg = png.with_extension("svg");
        assert!(files.contains(&svg), "{} has no SVG twin", png.display());
        let size = png_size(png);
        assert_eq!(size, svg_size(&svg), "{}", png.display());
        let bytes = std::fs::metadata(png).expect("stat").len();
        assert!(
            bytes <= MAX_PNG_BYTES,
            "{} weighs {bytes} bytes, over {MAX_PNG_BYTES}",
            png.display()
        );
        assert!(
            size.0 >= 800 && size.1 >= 400,
            "{}: {size:?}",
            png.display()
        );
    }
}

/// A page that is one file: no script, no stylesheet or image fetched, nothing addressed over the network.
fn check_self_contained(html: &str) {
    let lower = html.to_lowercase();
    assert!(!lower.contains("<script"), "a script tag");
    assert!(!lower.contains("<link"), "a link tag");
    assert!(!lower.contains("<img"), "an img tag");
    for attribute in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!lower.contains(attribute), "{attribute}");
    }
}

fn names(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| f.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn plot_draws_each_runs_pictures_and_report_and_compares_runs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path();
    succeeded(&run_profile(
        out,
        "inference-perf",
        "sanity_random",
        "steady",
        &[
            "--override",
            "load.stages.0.rate=10",
            "--override",
            "load.stages.0.duration=2",
        ],
    ));
    succeeded(&run_profile(
        out,
        "guidellm",
        "sweep_random",
        "swept",
        &[
            "--override",
            // Synchronous, throughput, and two constant rates between them.
            "spec.profile.sweep_size=4",
            "--override",
            "spec.constraints.0.seconds=1",
        ],
    ));
    let (steady, swept) = (out.join("steady"), out.join("swept"));

    // One run directory: its own pictures, written into it, and its report.
    let files = plot(&[&steady]);
    check_pictures(&files);
    let written = names(&files);
    for name in [
        "ttft_distribution.png",
        "tpot_distribution.png",
        "itl_distribution.png",
        "e2e_distribution.png",
        "token_lengths.png",
        "ttft_vs_input.png",
        "latency_over_time.png",
        "throughput_over_time.png",
        "schedule_delay.png",
    ] {
        assert!(
            written.iter().any(|w| w == name),
            "{name} not in {written:?}"
        );
    }
    // One stage: no per-stage pictures, nothing against a load.
    assert!(
        !written
            .iter()
            .any(|w| w == "stages.png" || w == "latency_vs_load.png")
    );
    assert!(files.iter().all(|f| f.starts_with(&steady)));
    let report = std::fs::read_to_string(steady.join("report.html")).expect("report.html");
    check_self_contained(&report);
    assert!(report.contains("llmbench run steady"));
    // The summary table, the plots inline, and the profile as rendered.
    assert!(report.contains("<th colspan=\"3\">TTFT ms</th>"));
    assert!(report.matches("<svg").count() >= 7);
    assert!(report.contains("request_timeout: 30"));

    // A sweep: its figures against each stage's offered rate, first, and the per-stage pictures.
    let files = plot(&[&swept]);
    check_pictures(&files);
    let written = names(&files);
    assert_eq!(written[0], "latency_vs_load.png", "{written:?}");
    for name in ["stages.png", "throughput_vs_latency.png", "pareto.png"] {
        assert!(
            written.iter().any(|w| w == name),
            "{name} not in {written:?}"
        );
    }
    // guidellm's sweep: synchronous, throughput, then a constant rate; only the rates are on the axis, and the
    // others are named.
    let by_load = std::fs::read_to_string(swept.join("plots/latency_vs_load.svg")).expect("svg");
    assert!(by_load.contains("offered rate (requests/s)"));
    assert!(
        by_load.contains("stages 0 (synchronous), 1 (throughput) had no offered rate"),
        "the stages left out are not named"
    );
    let report = std::fs::read_to_string(swept.join("report.html")).expect("report.html");
    check_self_contained(&report);
    assert!(report.contains("llmbench run swept"));

    // Both side by side, into --output.
    let compared = out.join("compared");
    let output = llmbench()
        .arg("plot")
        .args([&steady, &swept])
        .arg("--output")
        .arg(&compared)
        .output()
        .expect("runs");
    succeeded(&output);
    let files: Vec<PathBuf> = stdout(&output)
        .lines()
        .filter_map(|line| line.strip_prefix("wrote "))
        .map(PathBuf::from)
        .collect();
    check_pictures(&files);
    assert_eq!(
        names(&files),
        [
            "latency_cdf.png",
            "latency_cdf.svg",
            "throughput_vs_latency.png",
            "throughput_vs_latency.svg",
            "pareto.png",
            "pareto.svg",
            "compare.html"
        ]
    );
    let page = std::fs::read_to_string(compared.join("compare.html")).expect("compare.html");
    check_self_contained(&page);
    assert!(page.contains("steady") && page.contains("swept"));
    // Each run's legend entry names it, in the SVG's text.
    let cdf = std::fs::read_to_string(compared.join("latency_cdf.svg")).expect("svg");
    assert!(
        cdf.contains(">\nsteady\n<") || cdf.contains(">steady<"),
        "no legend entry for steady"
    );
}

#[test]
fn a_capacity_search_run_draws_its_points_against_the_load_with_the_slo() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Concurrency 1 then 2, both well within 5 s: the search ends above its max, with the answer 2.
    succeeded(&run_profile(
        tmp.path(),
        "inference-perf",
        "sanity_random",
        "search",
        &[
            "--capacity-search",
            "{load: concurrency, slo: [ttft_p99<=5s], start: 1, max: 2, min_duration: 1s, min_requests: 4}",
        ],
    ));
    let run = tmp.path().join("search");
    let plots = run.join("plots");
    let files: Vec<PathBuf> = std::fs::read_dir(&plots)
        .expect("plots/")
        .map(|e| e.expect("entry").path())
        .collect();
    check_pictures(&files);
    let chart = std::fs::read_to_string(plots.join("capacity_search.svg")).expect("the chart");
    roxmltree::Document::parse(&chart).expect("well-formed");
    for text in [
        "concurrency (requests in flight)",
        "ttft_p99 (ms)",
        "SLO ≤ 5000 ms",
        "passed",
        "answer 2",
        "capacity at least 2 in flight: the search",
    ] {
        assert!(chart.contains(text), "the chart lacks `{text}`");
    }
    // No point failed, so no mark for one in the legend.
    assert!(!chart.contains(">failed<") && !chart.contains(">\nfailed\n<"));
    // The chart leads the run's report.
    let report = std::fs::read_to_string(run.join("report.html")).expect("report.html");
    let chart_at = report
        .find("SLO capacity search")
        .expect("the chart in report.html");
    let distribution_at = report.find("TTFT distribution").expect("a distribution");
    assert!(chart_at < distribution_at);
}

#[test]
fn plot_refuses_a_directory_that_holds_no_results() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let output = llmbench()
        .arg("plot")
        .arg(tmp.path())
        .arg("--output")
        .arg(tmp.path().join("out"))
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("neither a run directory"),
        "{}",
        stderr(&output)
    );
}
