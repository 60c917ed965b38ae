//! AIPerf 0.13's YAML config file (`aiperf profile --config FILE`, schema 2.0) → the flag map [`super::aiperf`]
//! reads, so a config runs exactly as the equivalent command line does.
//!
//! From the aiperf 0.13.0 wheel: `config/loader/core.py` (strict YAML, the flat shape auto-migrated under
//! `benchmark:`), `config/loader/normalizers.py` (`model`→`models`, `dataset`→`datasets`, `warmup:`/`profiling:`
//! and a flat `phases: {type: …}` → a phase list, `isl`/`osl` hoisted into `prompts`), `config/config.py` and the
//! section models (`extra="forbid"` everywhere, camelCase or snake_case keys), `config/phases.py` (stop conditions,
//! `gracePeriod` only with `duration`, without it a duration phase waits for every response), and the flag
//! converters `config/flags/_converter_*.py`, which show which flag each key is: `prompts.isl: {mean, stddev}` is
//! `--isl`/`--isl-stddev`, a `--warmup-request-count` phase is the profiling phase's type, rate and concurrency
//! with `requests`, and so on. Keys AIPerf knows that llmbench does not run are refused by name with the reason;
//! keys AIPerf does not know are errors with the nearest known key, as AIPerf's models refuse extras.

use super::error::{Warning, WarningKind, WorkloadError};
use super::reader::{At, Ctx, MapReader, nearest_key};
use super::yaml::{Key, Node, Value};

/// Whether a profile is an AIPerf config file rather than a flag map: its root has `benchmark` or `schemaVersion`
/// (no `aiperf profile` flag has either name).
pub(super) fn is_config(doc: &Node) -> bool {
    doc.get("benchmark").is_some() || doc.get("schemaVersion").is_some()
}

/// A config as flags: the flag map, and for each flag the config key it came from (for messages).
pub(super) struct Flags {
    pub map: Node,
    origins: Vec<(String, String)>,
    /// The profiling phases after the first, each as the whole flag map it runs as (the first phase's keys and
    /// the warm-up's replaced by its own): llmbench runs each as a stage of its own.
    pub later_phases: Vec<Flags>,
    /// Every profiling phase's name, in order (AIPerf's `phases/<name>/` exports).
    pub phase_names: Vec<String>,
    /// Where each later phase is in the config (its key path and line), for messages.
    pub later_at: Vec<(String, u32)>,
}

/// The flags a phase's keys become (`phase`), which a later phase replaces, with the warm-up's (a later phase has
/// no warm-up of its own).
const PHASE_FLAGS: &[&str] = &[
    "request-rate",
    "request-rate-mode",
    "concurrency",
    "arrival-smoothness",
    "request-count",
    "benchmark-duration",
    "benchmark-grace-period",
    "conversation-num",
    "fixed-schedule",
    "fixed-schedule-auto-offset",
    "fixed-schedule-start-offset",
    "fixed-schedule-end-offset",
    "user-centric-rate",
    "num-users",
    "prefill-concurrency",
    "concurrency-ramp-duration",
    "prefill-concurrency-ramp-duration",
    "request-rate-ramp-duration",
    "request-rate-series",
    "request-cancellation-rate",
    "request-cancellation-delay",
    "failed-request-threshold",
    "warmup-request-count",
    "warmup-prefill-concurrency",
    "warmup-concurrency-ramp-duration",
    "warmup-prefill-concurrency-ramp-duration",
    "warmup-request-rate-ramp-duration",
];

impl Flags {
    fn set(&mut self, flag: &str, from: &At<'_>, value: Value) {
        if let Value::Map(entries) = &mut self.map.value {
            entries.retain(|(k, _)| k.name != flag);
            entries.push((
                Key {
                    name: flag.to_owned(),
                    line: from.line,
                },
                Node::new(value, from.line),
            ));
        }
        self.origins.retain(|(f, _)| f != flag);
        self.origins.push((flag.to_owned(), from.path.clone()));
    }

    fn copy(&mut self, flag: &str, from: &At<'_>) {
        self.set(flag, from, from.node.value.clone());
    }

    /// An empty flag map.
    fn empty(line: u32) -> Flags {
        Flags {
            map: Node::new(Value::Map(Vec::new()), line),
            origins: Vec::new(),
            later_phases: Vec::new(),
            phase_names: Vec::new(),
            later_at: Vec::new(),
        }
    }

    /// `base`'s flags with its phase's replaced by `phase`'s.
    fn with_phase(base: &Flags, phase: Flags) -> Flags {
        let mut out = Flags::empty(base.map.line);
        if let (Value::Map(mine), Value::Map(theirs)) = (&mut out.map.value, &base.map.value) {
            mine.extend(
                theirs
                    .iter()
                    .filter(|(k, _)| !PHASE_FLAGS.contains(&k.name.as_str()))
                    .cloned(),
            );
        }
        out.origins = base
            .origins
            .iter()
            .filter(|(f, _)| !PHASE_FLAGS.contains(&f.as_str()))
            .cloned()
            .collect();
        if let (Value::Map(mine), Value::Map(theirs)) = (&mut out.map.value, phase.map.value) {
            mine.extend(theirs);
        }
        out.origins.extend(phase.origins);
        out
    }

    /// Renames a flag in an error or warning back to the config key it came from.
    fn origin(&self, key: &str) -> Option<&str> {
        self.origins
            .iter()
            .find(|(flag, _)| flag == key)
            .map(|(_, path)| path.as_str())
    }

    pub fn relabel_error(&self, mut err: WorkloadError) -> WorkloadError {
        if let Some(path) = err.key().and_then(|k| self.origin(k)).map(str::to_owned) {
            match &mut err {
                WorkloadError::WrongType { key, .. }
                | WorkloadError::Invalid { key, .. }
                | WorkloadError::Missing { key, .. }
                | WorkloadError::Misplaced { key, .. }
                | WorkloadError::Unsupported { key, .. } => *key = path,
                _ => {}
            }
        }
        err
    }

    pub fn relabel_warnings(&self, warnings: &mut [Warning]) {
        for w in warnings {
            if let Some(path) = self.origin(&w.key) {
                w.key = path.to_owned();
            }
        }
    }
}

/// Every key AIPerf 0.13's models accept, per section (`aiperf-config.schema.json`, camelCase; snake_case is
/// accepted too): a key outside these is AIPerf's `extra_forbidden` error.
const ENVELOPE_KEYS: &[&str] = &[
    "schemaVersion",
    "benchmark",
    "sweep",
    "multiRun",
    "plot",
    "variables",
    "randomSeed",
    "noSweepTable",
];
const BENCHMARK_KEYS: &[&str] = &[
    "models",
    "model",
    "endpoint",
    "datasets",
    "dataset",
    "phases",
    "warmup",
    "profiling",
    "artifacts",
    "slos",
    "tokenizer",
    "gpuTelemetry",
    "serverMetrics",
    "networkLatency",
    "otel",
    "mlflow",
    "wandb",
    "runtime",
    "logging",
    "metrics",
    "accuracy",
    "scenario",
    "unsafeOverride",
];
const ENDPOINT_KEYS: &[&str] = &[
    "urls",
    "url",
    "urlStrategy",
    "type",
    "path",
    "apiKey",
    "timeout",
    "streaming",
    "transport",
    "connectionReuse",
    "useLegacyMaxTokens",
    "useServerTokenCount",
    "perChunkUsage",
    "template",
    "headers",
    "extra",
    "downloadVideoContent",
    "requestContentType",
    "sessionHeader",
    "uuidAndStrip",
    "waitForModelTimeout",
    "waitForModelInterval",
    "waitForModelMode",
    "resetKvCache",
    "serverProfiler",
];
const SYNTHETIC_KEYS: &[&str] = &[
    "name",
    "type",
    "entries",
    "randomSeed",
    "sampling",
    "prompts",
    "prefixPrompts",
    "turns",
    "turnDelay",
    "turnDelayRatio",
    "images",
    "audio",
    "video",
    "rankings",
    "isl",
    "osl",
    "systemPrompt",
    "systemPromptFile",
];
const FILE_KEYS: &[&str] = &[
    "name",
    "type",
    "path",
    "records",
    "format",
    "sampling",
    "synthesis",
    "entries",
    "randomSeed",
    "traceSessionSampleRatio",
    "interTurnDelayCapSeconds",
    "maxIdleGapCapSeconds",
    "replaySpeedup",
    "openLoopReplay",
    "openLoopStrict",
    "omitKvHints",
    "forceMinTokens",
    "osl",
    "promptBatchSize",
    "imageBatchSize",
    "audioBatchSize",
    "videoBatchSize",
    "blockSize",
    "traceIdleGapCapSeconds",
    "ignoreTraceDelays",
    "useThinkTimeOnly",
    "maxContextLength",
    "cacheBust",
    "prompts",
    "systemPrompt",
    "systemPromptFile",
];
const PROMPT_KEYS: &[&str] = &[
    "isl",
    "osl",
    "blockSize",
    "batchSize",
    "cacheBust",
    "corpus",
    "sequenceDistribution",
    "randomRangeRatio",
    "randomCorpusStyle",
];
const PREFIX_KEYS: &[&str] = &[
    "poolSize",
    "length",
    "sharedSystemLength",
    "userContextLength",
];
const PHASE_KEYS: &[&str] = &[
    "name",
    "kind",
    "type",
    "excludeFromResults",
    "requests",
    "duration",
    "sessions",
    "concurrency",
    "concurrencyRamp",
    "prefillConcurrency",
    "prefillRamp",
    "gracePeriod",
    "cancellation",
    "sla",
    "seamless",
    "timingMode",
    "failedRequestThreshold",
    "trajectoryStartMinRatio",
    "trajectoryStartMaxRatio",
    "burstPhaseStarts",
    "systemIdleGapCapSeconds",
    "agenticCacheWarmupDuration",
    "agenticWarmupGracePeriod",
    "rate",
    "rateRamp",
    "rateSeries",
    "smoothness",
    "users",
    "autoOffset",
    "startOffset",
    "endOffset",
    "adaptiveScale",
    "adaptiveSustainDuration",
    "adaptiveAssessmentPeriod",
    "adaptiveMinCompletedRequests",
    "adaptiveControlVariable",
    "adaptiveControlMin",
    "adaptiveControlMax",
    "adaptiveScaleStrategyType",
    "adaptiveScaleStepPolicy",
    "adaptiveScaleBaseStep",
    "adaptiveScaleMaxStepMultiplier",
    "adaptiveScaleStepPercent",
];
const DISTRIBUTION_KEYS: &[&str] = &["mean", "stddev", "min", "max", "type"];
/// `RankingsConfig` (`config/dataset/content.py`, `extra="forbid"`).
const RANKINGS_KEYS: &[&str] = &["passages", "passageTokens", "queryTokens"];
/// Sections that only say where output goes or how AIPerf's own processes run: nothing sent or measured changes.
const OUTPUT_ONLY: &[&str] = &[
    "artifacts",
    "gpuTelemetry",
    "logging",
    "runtime",
    "otel",
    "mlflow",
    "wandb",
];

/// `snake_case` of a camelCase key (pydantic's `to_snake` for these names).
fn snake(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A section's key under either spelling.
fn field<'n>(m: &mut MapReader<'n>, camel: &str) -> Option<At<'n>> {
    m.get_any(&[camel, &snake(camel)])
}

/// Ends a section: a key of AIPerf's schema not read above is refused by name (AIPerf acts on it, llmbench does
/// not run it); any other key is AIPerf's own error, with the nearest known key.
fn finish(
    ctx: &Ctx,
    m: &MapReader<'_>,
    known: &[&str],
    why: &dyn Fn(&str) -> String,
) -> Result<(), WorkloadError> {
    let Some(key) = m.unread().next() else {
        return Ok(());
    };
    let path = super::reader::join(&m.path, &key.name);
    let camel = known
        .iter()
        .find(|k| **k == key.name || snake(k) == key.name);
    if let Some(camel) = camel {
        return Err(ctx.unsupported(&path, key.line, why(camel)));
    }
    let spellings: Vec<String> = known
        .iter()
        .flat_map(|k| [k.to_string(), snake(k)])
        .collect();
    let hint = nearest_key(&key.name, spellings.iter().map(String::as_str))
        .map(|k| format!(" — did you mean `{k}`?"))
        .unwrap_or_default();
    Err(ctx.invalid(
        &path,
        key.line,
        format!("not a key of AIPerf 0.13's config here (its models forbid unknown keys){hint}"),
    ))
}

fn not_built(what: &str) -> impl Fn(&str) -> String + '_ {
    move |key| format!("the AIPerf config key `{key}` ({what})")
}

/// Refuses Jinja2 templates and `${VAR}` substitutions anywhere in the file: AIPerf renders them at load time from
/// `variables:` and the environment, which a profile parse does not read.
fn refuse_templates(ctx: &Ctx, node: &Node, path: &str, line: u32) -> Result<(), WorkloadError> {
    match &node.value {
        Value::Str(s) if s.contains("{{") || s.contains("{%") || s.contains("${") => Err(ctx.unsupported(
            path,
            line,
            "AIPerf's Jinja2 templates and `${VAR}` substitutions (render the values first: llmbench's \
             REPLACE_ENV_ placeholders and --set do that for a profile)",
        )),
        Value::Map(entries) => entries
            .iter()
            .try_for_each(|(k, v)| refuse_templates(ctx, v, &super::reader::join(path, &k.name), k.line)),
        Value::Seq(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| refuse_templates(ctx, v, &format!("{path}[{i}]"), v.line)),
        _ => Ok(()),
    }
}

/// Translates a config document into AIPerf's flags.
pub(super) fn to_flags(ctx: &mut Ctx, doc: &Node) -> Result<Flags, WorkloadError> {
    refuse_templates(ctx, doc, "", doc.line)?;
    let mut flags = Flags::empty(doc.line);
    let mut root = MapReader::root(ctx, doc)?;
    if let Some(f) = field(&mut root, "schemaVersion")
        && f.node.scalar_text().as_deref() != Some("2.0")
    {
        return Err(f.invalid(ctx, "AIPerf 0.13 reads schema version \"2.0\" only"));
    }
    if let Some(f) = field(&mut root, "randomSeed") {
        flags.copy("random-seed", &f);
    }
    for key in ["plot", "noSweepTable"] {
        if let Some(f) = field(&mut root, key) {
            ctx.warn(
                &f.path,
                f.line,
                WarningKind::Ignored,
                "AIPerf's plots and sweep table; llmbench writes its own",
            );
        }
    }
    match root.get("benchmark") {
        Some(f) => {
            let mut bench = f.map(ctx)?;
            benchmark(ctx, &mut bench, &mut flags)?;
        }
        // The pre-2.0 flat shape: AIPerf moves the body keys under `benchmark:` with a deprecation warning.
        None => {
            ctx.warn(
                "benchmark",
                root.line,
                WarningKind::Ignored,
                "the flat shape: AIPerf 0.13 reads its keys as `benchmark:`'s (deprecated)",
            );
            benchmark(ctx, &mut root, &mut flags)?;
        }
    }
    finish(
        ctx,
        &root,
        &[ENVELOPE_KEYS, BENCHMARK_KEYS].concat(),
        &|key| match key {
            "sweep" | "multiRun" => format!(
                "AIPerf's `{key}` (several benchmarks from one file: run one llmbench profile per point, or an \
             llmbench experiment)"
            ),
            "variables" => {
                "AIPerf's Jinja2 `variables` (render the values into the file first)".to_owned()
            }
            other => format!("the AIPerf config key `{other}`"),
        },
    )?;
    // Each later profiling phase runs as every other flag says, with its own phase keys.
    let later = std::mem::take(&mut flags.later_phases);
    flags.later_phases = later
        .into_iter()
        .map(|phase| Flags::with_phase(&flags, phase))
        .collect();
    Ok(flags)
}

fn benchmark(ctx: &mut Ctx, m: &mut MapReader<'_>, flags: &mut Flags) -> Result<(), WorkloadError> {
    models(ctx, m, flags)?;
    match field(m, "endpoint") {
        Some(f) => endpoint(ctx, &f, flags)?,
        None => {
            return Err(ctx.missing(
                &super::reader::join(&m.path, "endpoint"),
                m.line,
                "AIPerf requires it",
            ));
        }
    }
    dataset(ctx, m, flags)?;
    phases(ctx, m, flags)?;
    if let Some(f) = field(m, "slos") {
        let mut goodput = Vec::new();
        for (key, value) in f.node.entries().unwrap_or_default() {
            let at = At::new(value, super::reader::join(&f.path, &key.name), key.line);
            let v = super::vllm_bench::number(ctx, &at)?;
            goodput.push(format!("{}:{v}", key.name));
        }
        flags.set("goodput", &f, Value::Str(goodput.join(" ")));
    }
    if let Some(f) = field(m, "tokenizer") {
        let mut t = f.map(ctx)?;
        if let Some(name) = t.get("name") {
            flags.copy("tokenizer", &name);
        }
        if let Some(trust) = field(&mut t, "trustRemoteCode") {
            flags.copy("tokenizer-trust-remote-code", &trust);
        }
        finish(
            ctx,
            &t,
            &["name", "revision", "trustRemoteCode", "applyChatTemplate"],
            &not_built("tokenizer revisions and chat templates are not built"),
        )?;
    }
    if let Some(f) = field(m, "serverMetrics") {
        let mut s = f.map(ctx)?;
        if let Some(on) = field(&mut s, "enabled")
            && !super::vllm_bench::flag(ctx, &on)?
        {
            flags.set("no-server-metrics", &on, Value::Bool(true));
        }
        for (key, _) in f
            .node
            .entries()
            .unwrap_or_default()
            .iter()
            .filter(|(k, _)| k.name != "enabled")
        {
            s.ignore(
                ctx,
                &key.name,
                "llmbench scrapes the stack's own metrics endpoints (--metrics-endpoint)",
            );
        }
    }
    for key in OUTPUT_ONLY {
        if let Some(f) = field(m, key) {
            ctx.warn(&f.path, f.line, WarningKind::Ignored, "where AIPerf writes its output and how its processes run; llmbench writes its own results");
        }
    }
    if m.path.is_empty() {
        // The flat shape: the envelope's keys are read by the caller.
        for key in ENVELOPE_KEYS {
            m.known(&[key]);
        }
        return Ok(());
    }
    finish(ctx, m, BENCHMARK_KEYS, &|key| match key {
        "networkLatency" => {
            "AIPerf's network-latency calibration (its `network_adjusted_*` metrics)".to_owned()
        }
        "accuracy" => "AIPerf's accuracy benchmarks (graded answers)".to_owned(),
        "scenario" | "unsafeOverride" => "AIPerf's locked scenarios".to_owned(),
        "metrics" => "AIPerf's metric aggregation settings".to_owned(),
        other => format!("the AIPerf config key `{other}`"),
    })
}

fn models(ctx: &Ctx, m: &mut MapReader<'_>, flags: &mut Flags) -> Result<(), WorkloadError> {
    let single = m.get("model");
    let many = m.get("models");
    let f = match (single, many) {
        (Some(_), Some(b)) => {
            return Err(b.invalid(
                ctx,
                "'model' cannot be used with 'models' (AIPerf refuses it)",
            ));
        }
        (Some(f), None) | (None, Some(f)) => f,
        (None, None) => {
            return Err(ctx.missing(
                &super::reader::join(&m.path, "models"),
                m.line,
                "AIPerf requires it",
            ));
        }
    };
    let names: Vec<At<'_>> = match &f.node.value {
        Value::Str(_) => vec![At::new(f.node, f.path.clone(), f.line)],
        Value::Seq(_) => f.seq(ctx)?,
        Value::Map(_) => {
            let mut adv = f.map(ctx)?;
            let items = adv
                .get("items")
                .map(|i| i.seq(ctx))
                .transpose()?
                .unwrap_or_default();
            if let Some(strategy) = adv.get("strategy") {
                flags.copy("model-selection-strategy", &strategy);
            }
            finish(
                ctx,
                &adv,
                &["strategy", "items"],
                &not_built("model selection"),
            )?;
            let mut names = Vec::new();
            for item in items {
                let mut it = item.map(ctx)?;
                let name = it.require(ctx, "name", "a model item needs a name")?;
                finish(
                    ctx,
                    &it,
                    &["name", "weight", "lora", "modalities", "tokenizer"],
                    &not_built("per-model weights, LoRA adapters, modalities and tokenizers"),
                )?;
                names.push(name);
            }
            names
        }
        _ => {
            return Err(ctx.wrong_type(
                &f.path,
                f.node,
                "a model name, a list of them, or {items: [...]}",
            ));
        }
    };
    match names.as_slice() {
        [one] => flags.copy("model", one),
        // Several: `--model-names` as a list, spread over the requests by the selection strategy.
        _ => flags.set(
            "model",
            &f,
            Value::Seq(names.iter().map(|n| n.node.clone()).collect()),
        ),
    }
    Ok(())
}

fn endpoint(ctx: &mut Ctx, f: &At<'_>, flags: &mut Flags) -> Result<(), WorkloadError> {
    let mut e = f.map(ctx)?;
    let url = match (e.get("url"), e.get("urls")) {
        (Some(_), Some(b)) => {
            return Err(b.invalid(ctx, "'url' cannot be used with 'urls' (AIPerf refuses it)"));
        }
        (Some(u), None) => Some(u),
        // Several: `--url` as a list, spread over the requests in turn.
        (None, Some(list)) => Some(list),
        (None, None) => None,
    };
    if let Some(u) = url {
        flags.copy("url", &u);
    }
    for (key, flag) in [
        ("type", "endpoint-type"),
        ("path", "endpoint"),
        ("streaming", "streaming"),
        ("apiKey", "api-key"),
        ("timeout", "request-timeout-seconds"),
        ("useServerTokenCount", "use-server-token-count"),
        ("sessionHeader", "session-header"),
        ("urlStrategy", "url-strategy"),
    ] {
        if let Some(v) = field(&mut e, key) {
            flags.copy(flag, &v);
        }
    }
    for (key, flag) in [("headers", "header"), ("extra", "extra-inputs")] {
        if let Some(v) = field(&mut e, key) {
            if v.node.entries().is_none() {
                return Err(ctx.wrong_type(&v.path, v.node, "a map"));
            }
            // The flags take a JSON object as it is (`parse_str_or_dict_as_tuple_list`).
            flags.set(flag, &v, Value::Str(v.node.to_json().to_string()));
        }
    }
    finish(ctx, &e, ENDPOINT_KEYS, &|key| {
        format!("the AIPerf endpoint key `{key}` (not built)")
    })
}

/// An AIPerf sampling distribution: a number is that value; `{mean, stddev}` a positive normal, as the flags'
/// mean and stddev make it. Other shapes (bounds, lognormal, multimodal, empirical) are refused.
fn distribution(
    ctx: &Ctx,
    f: &At<'_>,
    flags: &mut Flags,
    mean_flag: &str,
    stddev_flag: &str,
) -> Result<(), WorkloadError> {
    if f.node.entries().is_none() {
        flags.copy(mean_flag, f);
        return Ok(());
    }
    let mut d = f.map(ctx)?;
    if let Some(t) = d.get("type")
        && t.node.scalar_text().as_deref() != Some("normal")
    {
        return Err(t.unsupported(ctx, "distributions other than a normal {mean, stddev}"));
    }
    match d.get("mean") {
        Some(mean) => flags.copy(mean_flag, &mean),
        None => {
            return Err(ctx.missing(
                &super::reader::join(&f.path, "mean"),
                f.line,
                "a distribution needs its mean",
            ));
        }
    }
    if let Some(sd) = d.get("stddev") {
        flags.copy(stddev_flag, &sd);
    }
    finish(
        ctx,
        &d,
        DISTRIBUTION_KEYS,
        &not_built("bounds on a length distribution"),
    )
}

fn dataset(ctx: &Ctx, m: &mut MapReader<'_>, flags: &mut Flags) -> Result<(), WorkloadError> {
    let f = match (m.get("dataset"), m.get("datasets")) {
        (Some(_), Some(b)) => {
            return Err(b.invalid(
                ctx,
                "'dataset' cannot be used with 'datasets' (AIPerf refuses it)",
            ));
        }
        (Some(f), None) => f,
        (None, Some(list)) => {
            let mut items = list.seq(ctx)?;
            if items.len() != 1 {
                return Err(list.invalid(ctx, "AIPerf 0.13 loads exactly one dataset"));
            }
            items.remove(0)
        }
        (None, None) => {
            return Err(ctx.missing(
                &super::reader::join(&m.path, "datasets"),
                m.line,
                "AIPerf requires it",
            ));
        }
    };
    let mut d = f.map(ctx)?;
    d.skip("name");
    if let Some(s) = d.get("sampling") {
        flags.copy("dataset-sampling-strategy", &s);
    }
    let kind = d.get("type").and_then(|t| t.node.scalar_text());
    match kind.as_deref() {
        None | Some("synthetic") => {
            // AIPerf's `SyntheticDataset.entries` default is 100, as the flags' `--num-dataset-entries`.
            if let Some(n) = d.get("entries") {
                flags.copy("num-dataset-entries", &n);
            }
            let mut prompts = d.get("prompts").map(|p| p.map(ctx)).transpose()?;
            for (key, mean, stddev) in [("isl", "isl", "isl-stddev"), ("osl", "osl", "osl-stddev")] {
                // `isl`/`osl` beside `prompts` are hoisted into it (`_hoist_synthetic_prompt_fields`).
                let at = d.get(key).or_else(|| prompts.as_mut().and_then(|p| p.get(key)));
                if let Some(at) = at {
                    distribution(ctx, &at, flags, mean, stddev)?;
                }
            }
            if let Some(p) = &mut prompts {
                if let Some(b) = field(p, "blockSize") {
                    flags.copy("isl-block-size", &b);
                }
                finish(ctx, p, PROMPT_KEYS, &not_built("prompt corpora, batches, sequence distributions and cache busting"))?;
            }
            if let Some(p) = field(&mut d, "prefixPrompts") {
                let mut p = p.map(ctx)?;
                for (key, flag) in [("poolSize", "prompt-prefix-pool-size"), ("length", "prompt-prefix-length")] {
                    if let Some(v) = field(&mut p, key) {
                        flags.copy(flag, &v);
                    }
                }
                finish(ctx, &p, PREFIX_KEYS, &not_built("shared system prompts and user context prompts"))?;
            }
            if let Some(t) = d.get("turns") {
                distribution(ctx, &t, flags, "conversation-turn-mean", "conversation-turn-stddev")?;
            }
            if let Some(t) = field(&mut d, "turnDelay") {
                distribution(ctx, &t, flags, "conversation-turn-delay-mean", "conversation-turn-delay-stddev")?;
            }
            if let Some(r) = field(&mut d, "turnDelayRatio") {
                flags.copy("conversation-turn-delay-ratio", &r);
            }
            // `rankings` (`RankingsConfig`): what `_build_rankings` makes of the `--rankings-*` flags, read back.
            if let Some(r) = d.get("rankings") {
                let mut r = r.map(ctx)?;
                for (key, mean, stddev) in [
                    ("passages", "rankings-passages-mean", "rankings-passages-stddev"),
                    (
                        "passageTokens",
                        "rankings-passages-prompt-token-mean",
                        "rankings-passages-prompt-token-stddev",
                    ),
                    (
                        "queryTokens",
                        "rankings-query-prompt-token-mean",
                        "rankings-query-prompt-token-stddev",
                    ),
                ] {
                    if let Some(v) = field(&mut r, key) {
                        distribution(ctx, &v, flags, mean, stddev)?;
                    }
                }
                finish(ctx, &r, RANKINGS_KEYS, &not_built("rankings"))?;
            }
            finish(ctx, &d, SYNTHETIC_KEYS, &not_built(
                "per-dataset seeds, system prompts, images, audio and video are not built",
            ))
        }
        Some("file") => {
            let path = d.require(ctx, "path", "a file dataset needs its path (inline `records` are not built)")?;
            flags.copy("input-file", &path);
            // `FileDataset.format` defaults to single_turn.
            match d.get("format") {
                Some(fmt) => flags.copy("custom-dataset-type", &fmt),
                None => flags.set("custom-dataset-type", &f, Value::Str("single_turn".to_owned())),
            }
            if let Some(n) = d.get("entries") {
                flags.copy("num-dataset-entries", &n);
            }
            if let Some(o) = d.get("osl") {
                distribution(ctx, &o, flags, "osl", "osl-stddev")?;
            }
            if let Some(b) = field(&mut d, "blockSize") {
                flags.copy("isl-block-size", &b);
            }
            finish(ctx, &d, FILE_KEYS, &not_built("trace replay tuning, synthesis and inline records are not built"))
        }
        Some(other) => Err(ctx.unsupported(
            &super::reader::join(&f.path, "type"),
            f.line,
            format!("the `{other}` dataset type (synthetic and file are built; public datasets are downloaded by AIPerf)"),
        )),
    }
}

/// A phase as AIPerf normalises it: its name and kind, and the map.
struct Phase<'n> {
    at: At<'n>,
    warmup: bool,
}

fn phases(ctx: &mut Ctx, m: &mut MapReader<'_>, flags: &mut Flags) -> Result<(), WorkloadError> {
    let warmup = m.get("warmup");
    let profiling = m.get("profiling");
    let list = m.get("phases");
    let mut phases: Vec<Phase<'_>> = Vec::new();
    match (warmup, profiling, list) {
        (Some(w), _, Some(_)) | (_, Some(w), Some(_)) => {
            return Err(w.invalid(ctx, "cannot be used with 'phases' (AIPerf refuses it)"));
        }
        (Some(w), None, None) => {
            return Err(w.invalid(ctx, "'warmup' requires 'profiling' (AIPerf refuses it)"));
        }
        (w, Some(p), None) => {
            if let Some(w) = w {
                phases.push(Phase {
                    at: w,
                    warmup: true,
                });
            }
            phases.push(Phase {
                at: p,
                warmup: false,
            });
        }
        (None, None, Some(list)) => match &list.node.value {
            // A flat `phases: {type: …}` is one profiling phase.
            Value::Map(_) if list.node.get("type").is_some() => phases.push(Phase {
                at: list,
                warmup: false,
            }),
            Value::Map(_) => {
                return Err(list.invalid(
                    ctx,
                    "phases must be a list of named phase configs (AIPerf refuses a map)",
                ));
            }
            _ => {
                for item in list.seq(ctx)? {
                    let name = item.node.get("name").and_then(Node::scalar_text);
                    let kind = item
                        .node
                        .get("kind")
                        .and_then(Node::scalar_text)
                        .or(name.clone());
                    let warmup = match kind.as_deref() {
                        Some("warmup") => true,
                        Some("profiling") => false,
                        _ => return Err(item.invalid(ctx, "a phase needs a `kind` (warmup or profiling) unless it is named warmup or profiling (AIPerf refuses it)")),
                    };
                    phases.push(Phase { at: item, warmup });
                }
            }
        },
        (None, None, None) => {
            return Err(ctx.missing(
                &super::reader::join(&m.path, "phases"),
                m.line,
                "AIPerf requires at least a profiling phase",
            ));
        }
    }
    let (warmups, profiles): (Vec<&Phase<'_>>, Vec<&Phase<'_>>) =
        phases.iter().partition(|p| p.warmup);
    let Some((profile, later)) = profiles.split_first() else {
        return Err(ctx.invalid(
            &super::reader::join(&m.path, "phases"),
            m.line,
            "a 'profiling' phase is required (AIPerf refuses a warm-up alone)",
        ));
    };
    if phases.first().is_some_and(|p| !p.warmup) && !warmups.is_empty() {
        return Err(warmups[0]
            .at
            .unsupported(ctx, "a warm-up phase after a profiling phase"));
    }
    // `validate_phase_names_unique`: AIPerf names each phase's artifacts after it.
    let mut seen: Vec<String> = Vec::new();
    for p in &phases {
        let name =
            p.at.node
                .get("name")
                .and_then(Node::scalar_text)
                .unwrap_or_else(|| if p.warmup { "warmup" } else { "profiling" }.to_owned());
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(p.at.invalid(
                ctx,
                format!(
                    "phase name `{name}` is not a strict identifier (letters, numbers, underscores and hyphens, \
                     starting with a letter or underscore; AIPerf refuses it)"
                ),
            ));
        }
        if seen.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
            return Err(p.at.invalid(
                ctx,
                format!("duplicate phase name '{name}' (names must be unique case-insensitively; AIPerf refuses it)"),
            ));
        }
        if !p.warmup {
            flags.phase_names.push(name.clone());
        }
        seen.push(name);
    }
    let profile = *profile;
    for p in later {
        let mut own = Flags::empty(p.at.line);
        phase(ctx, &p.at, &mut own, false)?;
        flags.later_phases.push(own);
        flags.later_at.push((p.at.path.clone(), p.at.line));
    }
    if warmups.len() > 1 {
        return Err(warmups[1].at.unsupported(ctx, "several warm-up phases"));
    }
    let pace = phase(ctx, &profile.at, flags, false)?;
    if let Some(w) = warmups.first() {
        let mut scratch = Flags::empty(0);
        let warm_pace = phase(ctx, &w.at, &mut scratch, true)?;
        if warm_pace != pace {
            return Err(w.at.unsupported(
                ctx,
                format!(
                    "a warm-up phase paced unlike the profiling phase ({warm_pace} against {pace}; llmbench runs \
                     AIPerf's warm-up as `--warmup-request-count` makes it: the profiling phase's type, rate and \
                     concurrency)"
                ),
            ));
        }
        // The warm-up phase's own `prefill_concurrency` and ramps are the `--warmup-*` flags.
        for (key, flag, warmup_flag) in [
            (
                "prefillConcurrency",
                "prefill-concurrency",
                "warmup-prefill-concurrency",
            ),
            (
                "concurrencyRamp",
                "concurrency-ramp-duration",
                "warmup-concurrency-ramp-duration",
            ),
            (
                "prefillRamp",
                "prefill-concurrency-ramp-duration",
                "warmup-prefill-concurrency-ramp-duration",
            ),
            (
                "rateRamp",
                "request-rate-ramp-duration",
                "warmup-request-rate-ramp-duration",
            ),
        ] {
            if let Some(n) = scratch.map.get(flag).cloned() {
                let at = At::new(&n, super::reader::join(&w.at.path, key), n.line);
                flags.copy(warmup_flag, &at);
            }
        }
        let requests = scratch.map.get("request-count").cloned();
        match requests {
            Some(n) if scratch.map.get("conversation-num").is_none() => {
                let at = At::new(&n, w.at.path.clone(), n.line);
                flags.copy("warmup-request-count", &at);
            }
            _ => {
                return Err(w.at.unsupported(
                    ctx,
                    "a warm-up phase bounded by duration or sessions (only `requests` is built)",
                ));
            }
        }
    }
    Ok(())
}

/// A phase's `concurrencyRamp`/`prefillRamp` (`config/ramp.py` `RampSpec`: a duration, or `{duration, strategy}`
/// with `duration` > 0) as `flag`. The phase runner ramps concurrency linearly whatever the strategy
/// (`_create_rampers` reads the duration alone), said so.
fn ramp(ctx: &mut Ctx, r: &At<'_>, flag: &str, flags: &mut Flags) -> Result<(), WorkloadError> {
    let duration = match &r.node.value {
        Value::Map(_) => {
            let mut m = r.map(ctx)?;
            let duration = field(&mut m, "duration");
            let strategy = field(&mut m, "strategy");
            finish(ctx, &m, &["duration", "strategy"], &|key| {
                format!("`{key}`")
            })?;
            if let Some(s) = &strategy {
                let name = s.node.scalar_text().unwrap_or_default();
                if !matches!(name.as_str(), "linear" | "exponential" | "poisson") {
                    return Err(s.invalid(
                        ctx,
                        format!("`{name}` is not a ramp strategy (linear, exponential, poisson)"),
                    ));
                }
                if name != "linear" {
                    ctx.warn(
                        &s.path,
                        s.line,
                        WarningKind::Ignored,
                        "AIPerf 0.13's phase runner ramps concurrency linearly whatever the strategy",
                    );
                }
            }
            match duration {
                Some(d) => d,
                None => {
                    return Err(ctx.missing(
                        &super::reader::join(&r.path, "duration"),
                        r.line,
                        "a ramp needs its `duration` (AIPerf refuses it)",
                    ));
                }
            }
        }
        _ => At::new(r.node, r.path.clone(), r.line),
    };
    let secs = seconds(ctx, &duration)?;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(duration.invalid(
            ctx,
            format!("must be greater than 0 (seconds; AIPerf refuses it), found {secs}"),
        ));
    }
    flags.set(flag, &duration, Value::Float(secs));
    Ok(())
}

/// A phase's `cancellation: {rate, delay}` (`config/cancellation.py` `CancellationConfig`: `rate` required,
/// 0–100, 0 disables it; `delay` ≥ 0, default 0) as `--request-cancellation-rate`/`-delay`. A warm-up's is
/// accepted and unused, as AIPerf's simulator never cancels a warm-up credit.
fn cancellation(
    ctx: &mut Ctx,
    c: &At<'_>,
    flags: &mut Flags,
    warmup: bool,
) -> Result<(), WorkloadError> {
    let mut m = c.map(ctx)?;
    let rate = field(&mut m, "rate");
    let delay = field(&mut m, "delay");
    finish(ctx, &m, &["rate", "delay"], &|key| format!("`{key}`"))?;
    let Some(rate) = rate else {
        return Err(ctx.missing(
            &super::reader::join(&c.path, "rate"),
            c.line,
            "a cancellation needs its `rate` (AIPerf refuses it)",
        ));
    };
    let percent = super::vllm_bench::number(ctx, &rate)?;
    if !(0.0..=100.0).contains(&percent) {
        return Err(rate.invalid(
            ctx,
            format!("must be between 0 and 100 (a percentage; AIPerf refuses it), found {percent}"),
        ));
    }
    if let Some(d) = &delay {
        let secs = super::vllm_bench::number(ctx, d)?;
        if secs.is_nan() || secs < 0.0 {
            return Err(d.invalid(
                ctx,
                format!("must be at least 0 (seconds; AIPerf refuses it), found {secs}"),
            ));
        }
    }
    if warmup {
        ctx.warn(
            &c.path,
            c.line,
            WarningKind::Ignored,
            "AIPerf never cancels a warm-up request (its simulator draws nothing in the warm-up phase)",
        );
        return Ok(());
    }
    // A rate of 0 turns the simulator off.
    if percent > 0.0 {
        flags.copy("request-cancellation-rate", &rate);
        if let Some(d) = &delay {
            flags.copy("request-cancellation-delay", d);
        }
    }
    Ok(())
}

/// One phase's keys as flags; returns its pace (type, rate, concurrency) for comparing a warm-up with it.
fn phase(
    ctx: &mut Ctx,
    f: &At<'_>,
    flags: &mut Flags,
    warmup: bool,
) -> Result<Pace, WorkloadError> {
    let mut p = f.map(ctx)?;
    p.skip("name");
    p.skip("kind");
    if let Some(x) = field(&mut p, "excludeFromResults")
        && super::vllm_bench::flag(ctx, &x)? != warmup
    {
        return Err(x.invalid(
            ctx,
            format!("must be {warmup} for this phase's kind (AIPerf refuses it)"),
        ));
    }
    let kind = match p.get("type") {
        Some(t) => t.node.scalar_text().unwrap_or_default(),
        None => {
            return Err(ctx.missing(
                &super::reader::join(&f.path, "type"),
                f.line,
                "each phase needs its `type` (AIPerf refuses it)",
            ));
        }
    };
    let concurrency = field(&mut p, "concurrency");
    let rate = field(&mut p, "rate");
    let series = field(&mut p, "rateSeries");
    match kind.as_str() {
        "concurrency" => {
            if let Some(r) = &rate {
                return Err(r.invalid(ctx, "a concurrency phase has no rate (AIPerf refuses it)"));
            }
        }
        // `FixedSchedulePhase`: a trace's own times, `auto_offset` (default true), `start_offset`, `end_offset`;
        // no stop condition needed (the trace decides).
        "fixed_schedule" => {
            if let Some(r) = &rate {
                return Err(r.invalid(
                    ctx,
                    "a fixed_schedule phase has no rate (AIPerf refuses it)",
                ));
            }
            flags.set("fixed-schedule", f, Value::Bool(true));
            match field(&mut p, "autoOffset") {
                Some(a) => flags.copy("fixed-schedule-auto-offset", &a),
                None => flags.set("fixed-schedule-auto-offset", f, Value::Bool(true)),
            }
            if let Some(o) = field(&mut p, "startOffset") {
                flags.copy("fixed-schedule-start-offset", &o);
            }
            if let Some(o) = field(&mut p, "endOffset") {
                flags.copy("fixed-schedule-end-offset", &o);
            }
        }
        // `UserCentricPhase`: `rate` and `users` (required), as `--user-centric-rate` and `--num-users`.
        "user_centric" => match (&rate, field(&mut p, "users")) {
            (Some(r), Some(u)) => {
                flags.copy("user-centric-rate", r);
                flags.copy("num-users", &u);
            }
            (None, _) => {
                return Err(ctx.missing(
                    &super::reader::join(&f.path, "rate"),
                    f.line,
                    "a rate phase needs its rate",
                ));
            }
            (Some(_), None) => {
                return Err(ctx.missing(
                    &super::reader::join(&f.path, "users"),
                    f.line,
                    "a user_centric phase needs its `users` (AIPerf refuses it)",
                ));
            }
        },
        // `RatePhaseConfig`: `rate` or `rate_series`, not both.
        "poisson" | "constant" | "gamma" => match (&rate, &series) {
            (Some(r), None) => {
                flags.copy("request-rate", r);
                flags.set("request-rate-mode", r, Value::Str(kind.clone()));
            }
            (None, Some(s)) => flags.set("request-rate-mode", s, Value::Str(kind.clone())),
            (Some(_), Some(s)) => {
                return Err(s.invalid(
                    ctx,
                    "rate and rate_series are mutually exclusive (AIPerf refuses it)",
                ));
            }
            (None, None) => {
                return Err(ctx.missing(
                    &super::reader::join(&f.path, "rate"),
                    f.line,
                    "rate-controlled phases require rate or rate_series",
                ));
            }
        },
        other => {
            let at = p.get("type");
            return Err(ctx.unsupported(
                &super::reader::join(&f.path, "type"),
                at.map_or(f.line, |a| a.line),
                format!(
                    "the `{other}` phase type (concurrency, poisson, gamma, constant, user_centric and \
                     fixed_schedule are built)"
                ),
            ));
        }
    }
    if let Some(c) = &concurrency {
        flags.copy("concurrency", c);
    }
    if let Some(c) = field(&mut p, "prefillConcurrency") {
        flags.copy("prefill-concurrency", &c);
    }
    // `seamless: false` (the default) is what llmbench does: a phase starts once the one before it drained.
    if let Some(x) = field(&mut p, "seamless")
        && super::vllm_bench::flag(ctx, &x)?
    {
        return Err(x.unsupported(
            ctx,
            "a seamless phase (AIPerf starts it while the previous phase's requests are still in flight; \
             llmbench starts each phase once the one before it drained)",
        ));
    }
    for (key, flag) in [
        ("concurrencyRamp", "concurrency-ramp-duration"),
        ("prefillRamp", "prefill-concurrency-ramp-duration"),
        ("rateRamp", "request-rate-ramp-duration"),
    ] {
        if let Some(r) = field(&mut p, key) {
            ramp(ctx, &r, flag, flags)?;
        }
    }
    if let Some(c) = field(&mut p, "cancellation") {
        cancellation(ctx, &c, flags, warmup)?;
    }
    // `RateSeriesConfig`: a path, a list of points, or `{path}` / `{points}` (not both); only the rate phases have
    // the field (a user-centric one refuses it, as the flags do).
    if let Some(r) = &series
        && !matches!(
            kind.as_str(),
            "poisson" | "constant" | "gamma" | "user_centric"
        )
    {
        return Err(r.invalid(
            ctx,
            format!("a `{kind}` phase has no `rateSeries` (AIPerf refuses it)"),
        ));
    }
    if let Some(r) = series {
        match &r.node.value {
            Value::Map(_) => {
                let mut m = r.map(ctx)?;
                let path = field(&mut m, "path");
                let points = field(&mut m, "points");
                finish(ctx, &m, &["path", "points"], &|key| format!("`{key}`"))?;
                match (path, points) {
                    (Some(one), None) | (None, Some(one)) => {
                        flags.copy("request-rate-series", &one)
                    }
                    (Some(_), Some(p)) => {
                        return Err(p.invalid(
                            ctx,
                            "rate_series.path and rate_series.points are mutually exclusive (AIPerf refuses it)",
                        ));
                    }
                    (None, None) => {
                        return Err(r.invalid(
                            ctx,
                            "a request-rate series requires at least two points (AIPerf refuses it)",
                        ));
                    }
                }
            }
            _ => flags.copy("request-rate-series", &r),
        }
    }
    // `GammaPhase.smoothness` (only a gamma phase has the field; `extra="forbid"` refuses it elsewhere).
    let smoothness = match field(&mut p, "smoothness") {
        Some(k) if kind == "gamma" => {
            flags.copy("arrival-smoothness", &k);
            Some(super::vllm_bench::number(ctx, &k)?)
        }
        Some(k) => {
            return Err(k.invalid(
                ctx,
                format!(
                    "a `{kind}` phase has no `smoothness` (AIPerf refuses it: only gamma phases do)"
                ),
            ));
        }
        None => None,
    };
    let requests = field(&mut p, "requests");
    let duration = field(&mut p, "duration");
    let sessions = field(&mut p, "sessions");
    if requests.is_none() && duration.is_none() && sessions.is_none() && kind != "fixed_schedule" {
        return Err(f.invalid(ctx, "at least one of 'requests', 'duration', or 'sessions' must be specified (AIPerf refuses it)"));
    }
    if let (Some(_), Some(d)) = (&requests, &duration) {
        return Err(d.unsupported(
            ctx,
            "a phase bounded by both requests and duration (whichever comes first)",
        ));
    }
    if let Some(r) = &requests {
        flags.copy("request-count", r);
    }
    if let Some(d) = &duration {
        flags.set("benchmark-duration", d, Value::Float(seconds(ctx, d)?));
    }
    if let Some(s) = &sessions {
        flags.copy("conversation-num", s);
    }
    // `failed_request_threshold`: consulted for profiling phases only (`get_profiling_phases`); a warm-up's is never
    // read, by AIPerf either.
    if let Some(t) = field(&mut p, "failedRequestThreshold")
        && !warmup
    {
        flags.copy("failed-request-threshold", &t);
    }
    match (field(&mut p, "gracePeriod"), &duration) {
        (Some(g), Some(_)) => flags.set(
            "benchmark-grace-period",
            &g,
            Value::Float(seconds(ctx, &g)?),
        ),
        (Some(g), None) => {
            return Err(g.invalid(
                ctx,
                "grace_period requires duration to be set (AIPerf refuses it)",
            ));
        }
        // Without one a duration phase waits for every response (`timing/config.py`: `float("inf")`).
        (None, Some(d)) => flags.set("benchmark-grace-period", d, Value::Float(f64::INFINITY)),
        (None, None) => {}
    }
    finish(ctx, &p, PHASE_KEYS, &|key| {
        format!("the AIPerf phase key `{key}` (not built)")
    })?;
    let rate = rate
        .map(|r| super::vllm_bench::number(ctx, &r))
        .transpose()?;
    let concurrency = concurrency
        .map(|c| super::vllm_bench::number(ctx, &c))
        .transpose()?;
    Ok(Pace {
        // `ConcurrencyPhase.concurrency` defaults to 1.
        concurrency: if kind == "concurrency" {
            concurrency.or(Some(1.0))
        } else {
            concurrency
        },
        kind,
        rate,
        smoothness,
    })
}

/// What paces a phase, to compare a warm-up phase with the profiling phase.
#[derive(PartialEq)]
struct Pace {
    kind: String,
    rate: Option<f64>,
    concurrency: Option<f64>,
    smoothness: Option<f64>,
}

impl std::fmt::Display for Pace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: Option<f64>| v.map_or("unset".to_owned(), |v| v.to_string());
        write!(
            f,
            "{}, rate {}, concurrency {}",
            self.kind,
            show(self.rate),
            show(self.concurrency)
        )?;
        match self.smoothness {
            Some(k) => write!(f, ", smoothness {k}"),
            None => Ok(()),
        }
    }
}

/// AIPerf's `DurationSpec`: seconds, or `30s`, `5m`, `2h` (`s|sec|m|min|h|hr|hour`), or `inf`.
fn seconds(ctx: &Ctx, f: &At<'_>) -> Result<f64, WorkloadError> {
    let bad = || {
        f.invalid(
            ctx,
            "not a duration (a number of seconds, '30s', '5m', '2h' or 'inf'; AIPerf refuses it)",
        )
    };
    match &f.node.value {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(v) => Ok(*v),
        Value::Str(s) => {
            let s = s.trim().to_ascii_lowercase();
            if s == "inf" || s == "infinity" {
                return Ok(f64::INFINITY);
            }
            let split = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            let (number, unit) = s.split_at(split);
            let value: f64 = number.parse().map_err(|_| bad())?;
            let scale = match unit.trim() {
                "" | "s" | "sec" => 1.0,
                "m" | "min" => 60.0,
                "h" | "hr" | "hour" => 3600.0,
                _ => return Err(bad()),
            };
            Ok(value * scale)
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::workload::*;

    fn parse(text: &str) -> Result<Parsed, WorkloadError> {
        parse_profile(
            Harness::Aiperf,
            "bench.yaml",
            text,
            &ParseOptions::default(),
        )
    }

    fn refusal(text: &str) -> String {
        parse(text).expect_err("refused").to_string()
    }

    /// The same run as flags and as a config: everything but the dialect is equal.
    fn assert_same(config: &str, flags: &str) {
        let from_config = parse(config).expect("config parses").workload;
        let mut from_flags = parse(flags).expect("flags parse").workload;
        assert_eq!(from_config.dialect, Dialect::AiperfConfig);
        from_flags.dialect = Dialect::AiperfConfig;
        assert_eq!(from_config, from_flags);
    }

    /// A phase's `prefillConcurrency` and `cancellation` are `--prefill-concurrency` and
    /// `--request-cancellation-rate`/`-delay` (`_converter_profiling.py` `apply_cancellation` routes them there);
    /// the warm-up's prefill slots are `--warmup-prefill-concurrency`, and its cancellation is unused (AIPerf's
    /// simulator draws nothing in the warm-up phase), said so.
    #[test]
    fn phase_prefill_concurrency_and_cancellation_are_their_flags() {
        let config = "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: http://h:8000\n    \
                      streaming: true\n  dataset: {entries: 5}\n  warmup:\n    type: concurrency\n    \
                      concurrency: 4\n    requests: 2\n    prefillConcurrency: 1\n    cancellation: {rate: 50}\n  \
                      profiling:\n    type: concurrency\n    concurrency: 4\n    requests: 9\n    \
                      prefillConcurrency: 2\n    cancellation: {rate: 12.5, delay: 0.25}\n";
        let flags = "model: m\nurl: http://h:8000\nstreaming: true\nnum-dataset-entries: 5\nconcurrency: 4\n\
                     request-count: 9\nwarmup-request-count: 2\nprefill-concurrency: 2\n\
                     warmup-prefill-concurrency: 1\nrequest-cancellation-rate: 12.5\n\
                     request-cancellation-delay: 0.25\n";
        assert_same(config, flags);
        let warned = parse(config).expect("parses").warnings;
        assert!(
            warned
                .iter()
                .any(|w| w.key == "benchmark.warmup.cancellation" && w.line == Some(13)),
            "{warned:?}"
        );
        // A rate of 0 turns cancellation off.
        let off = config.replace("{rate: 12.5, delay: 0.25}", "{rate: 0, delay: 3}");
        let w = parse(&off).expect("parses").workload;
        assert!(
            matches!(&w.stages[0].arrival, Arrival::AiperfRate { credits, .. } if credits.cancellation.is_none()),
            "{:?}",
            w.stages[0].arrival
        );
        let err = refusal(&config.replace("{rate: 12.5, delay: 0.25}", "{rate: 12.5, dealy: 1}"));
        assert!(
            err.starts_with("bench.yaml:19: `benchmark.profiling.cancellation.dealy`")
                && err.contains("did you mean `delay`?"),
            "{err}"
        );
        let err = refusal(&config.replace("{rate: 12.5, delay: 0.25}", "{rate: 120}"));
        assert!(
            err.starts_with(
                "bench.yaml:19: `benchmark.profiling.cancellation.rate`: must be between 0 and 100"
            ),
            "{err}"
        );
        // `concurrencyRamp`/`prefillRamp`: a duration or `{duration, strategy}`; the warm-up's are `--warmup-*`.
        let ramped = config
            .replace(
                "    requests: 9\n",
                "    requests: 9\n    concurrencyRamp: 2s\n    prefillRamp: {duration: 1.5, strategy: exponential}\n",
            )
            .replace(
                "    requests: 2\n",
                "    requests: 2\n    concurrencyRamp: 0.5\n",
            );
        assert_same(
            &ramped,
            &format!(
                "{flags}concurrency-ramp-duration: 2\nprefill-concurrency-ramp-duration: 1.5\n\
                 warmup-concurrency-ramp-duration: 0.5\n"
            ),
        );
        let rate_config = "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: http://h:8000\n  \
                           dataset: {entries: 5}\n  profiling:\n    type: constant\n    rate: 8\n    requests: 9\n    \
                           rateRamp: {duration: 3}\n";
        assert_same(
            rate_config,
            "model: m\nurl: http://h:8000\nnum-dataset-entries: 5\nrequest-rate: 8\nrequest-rate-mode: constant\n\
             request-count: 9\nrequest-rate-ramp-duration: 3\n",
        );
        // `rateSeries`: a path, a list of points, or `{points}`.
        let series = rate_config.replace(
            "    rate: 8\n    requests: 9\n    rateRamp: {duration: 3}\n",
            "    requests: 9\n    rateSeries: {points: [{time_s: 0, qps: 2}, {timeS: 4, qps: 8}]}\n",
        );
        let from_config = parse(&series).expect("parses").workload;
        // The series' first rate is the phase's (`get_phase_rate`).
        assert!(
            matches!(&from_config.stages[0].arrival,
                Arrival::AiperfRate { pace: AiperfPace::Constant { rate }, credits, .. }
                if *rate == 2.0
                    && credits.rate_series.as_ref().is_some_and(|s| *s.points == [(0.0, 2.0), (4.0, 8.0)])),
            "{:?}",
            from_config.stages[0].arrival
        );
        let err = refusal(&series.replace("    requests: 9\n", "    rate: 3\n    requests: 9\n"));
        assert!(
            err.contains("rate and rate_series are mutually exclusive"),
            "{err}"
        );
        let warned = parse(&ramped).expect("parses").warnings;
        assert!(
            warned
                .iter()
                .any(|w| w.key == "benchmark.profiling.prefillRamp.strategy"),
            "{warned:?}"
        );
        let err =
            refusal(&config.replace("    prefillConcurrency: 2\n", "    prefillConcurrency: 5\n"));
        assert!(
            err.starts_with("bench.yaml:18: `benchmark.profiling.prefillConcurrency`: 5 is more than --concurrency 4"),
            "{err}"
        );
    }

    /// Several profiling phases: each a stage of its own, in order, the warm-up before the first only; their
    /// names are kept for AIPerf's `phases/<name>/` exports.
    #[test]
    fn several_profiling_phases_become_one_stage_each() {
        let config = "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: http://h:8000\n  \
                      dataset: {entries: 5}\n  phases:\n    - {name: warmup, type: concurrency, concurrency: 2, \
                      requests: 2}\n    - {name: baseline, kind: profiling, type: concurrency, concurrency: 2, \
                      requests: 4}\n    - {name: burst, kind: profiling, type: constant, rate: 10, requests: 6, \
                      cancellation: {rate: 20}}\n";
        let w = parse(config).expect("parses").workload;
        assert_eq!(w.report.aiperf_phases, ["baseline", "burst"]);
        assert_eq!(w.stages.len(), 2);
        assert!(
            matches!(
                &w.stages[0].arrival,
                Arrival::AiperfRate { pace: AiperfPace::Burst, concurrency: Some(2), warmup_requests: 2, credits, .. }
                    if credits.cancellation.is_none()
            ),
            "{:?}",
            w.stages[0].arrival
        );
        assert_eq!(w.stages[0].limit.requests, Some(4));
        assert!(
            matches!(
                &w.stages[1].arrival,
                Arrival::AiperfRate { pace: AiperfPace::Constant { rate }, concurrency: None, warmup_requests: 0, credits, .. }
                    if *rate == 10.0 && credits.cancellation.is_some_and(|c| c.percent == 20.0)
            ),
            "{:?}",
            w.stages[1].arrival
        );
        assert_eq!(w.stages[1].limit.requests, Some(6));
        // A warm-up between profiling phases, duplicate names, and a dataset the phases would size apart.
        let err = refusal(&config.replace("name: burst", "name: Baseline"));
        assert!(err.contains("duplicate phase name 'Baseline'"), "{err}");
        let err =
            refusal(&config.replace("name: burst, kind: profiling", "name: burst, kind: warmup"));
        assert!(err.contains("several warm-up phases"), "{err}");
        let err = refusal(&config.replace("{entries: 5}", "{isl: 8}"));
        assert!(
            err.contains("bench.yaml:10: `benchmark.phases[2]`") && err.contains("set `entries`"),
            "{err}"
        );
    }

    /// `dataset.rankings` (`RankingsConfig`) is what `_build_rankings` makes of the `--rankings-*` flags.
    #[test]
    fn a_rankings_section_is_its_rankings_flags() {
        let config = "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: http://h:8000\n    \
                      type: nim_rankings\n  dataset:\n    type: synthetic\n    entries: 5\n    rankings:\n      \
                      passages: {mean: 4, stddev: 1}\n      passage_tokens: 64\n      queryTokens: {mean: 8, stddev: 2}\n  \
                      profiling:\n    type: concurrency\n    concurrency: 2\n    requests: 9\n";
        let flags = "model: m\nurl: http://h:8000\nendpoint-type: nim_rankings\nnum-dataset-entries: 5\n\
                     rankings-passages-mean: 4\nrankings-passages-stddev: 1\nrankings-passages-prompt-token-mean: 64\n\
                     rankings-query-prompt-token-mean: 8\nrankings-query-prompt-token-stddev: 2\nconcurrency: 2\n\
                     request-count: 9\n";
        assert_same(config, flags);
        // `RankingsConfig` forbids other keys.
        let wrong = config.replace("passage_tokens", "passage_token");
        let err = refusal(&wrong);
        assert!(err.contains("passage_tokens"), "{err}");
    }

    #[test]
    fn the_minimal_template_is_its_concurrency_flags() {
        // AIPerf 0.13 `config/templates/minimal.yaml`: every shorthand form.
        let config = "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: http://localhost:8000\n  \
                      dataset:\n    type: synthetic\n    entries: 100\n    prompts:\n      isl: 512\n      osl: 128\n  \
                      phases:\n    type: concurrency\n    concurrency: 8\n    requests: 100\n";
        assert_same(
            config,
            "model: m\nurl: http://localhost:8000\nnum-dataset-entries: 100\nisl: 512\nosl: 128\nconcurrency: 8\n\
             request-count: 100\n",
        );
        let w = parse(config).expect("parses").workload;
        assert_eq!(w.stages[0].limit, StageLimit::requests(100));
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::Closed { concurrency: 8, .. }
        ));
    }

    #[test]
    fn a_gamma_phase_is_the_gamma_flags_and_its_warm_up_must_match_it() {
        let head = "randomSeed: 3\nbenchmark:\n  model: m\n  endpoint: {url: http://x}\n  dataset: {entries: 5}\n";
        let config = format!(
            "{head}  warmup: {{type: gamma, rate: 4, smoothness: 0.5, requests: 2}}\n  \
             profiling: {{type: gamma, rate: 4, smoothness: 0.5, requests: 6}}\n"
        );
        assert_same(
            &config,
            "model: m\nurl: http://x\nrandom-seed: 3\nnum-dataset-entries: 5\nrequest-rate: 4\n\
             request-rate-mode: gamma\narrival-smoothness: 0.5\nrequest-count: 6\nwarmup-request-count: 2\n",
        );
        let w = parse(&config).expect("parses").workload;
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Gamma {
                    rate: 4.0,
                    smoothness: 0.5,
                    seed: 3
                },
                warmup_requests: 2,
                ..
            }
        ));
        let err = refusal(&format!(
            "{head}  warmup: {{type: gamma, rate: 4, requests: 2}}\n  \
             profiling: {{type: gamma, rate: 4, smoothness: 0.5, requests: 6}}\n"
        ));
        assert!(
            err.starts_with("bench.yaml:6: `benchmark.warmup`")
                && err.contains("gamma, rate 4, concurrency unset against gamma, rate 4, concurrency unset, smoothness 0.5"),
            "{err}"
        );
    }

    #[test]
    fn a_rate_phase_with_duration_and_grace_is_the_rate_loop_flags() {
        // AIPerf 0.13 `config/templates/latency_test.yaml`, its output-only `artifacts` warned about.
        let config = "schemaVersion: \"2.0\"\nrandomSeed: 42\nbenchmark:\n  model: m\n  endpoint:\n    \
                      url: http://localhost:8000/v1/chat/completions\n    type: chat\n    streaming: true\n    \
                      timeout: 600.0\n  dataset:\n    type: synthetic\n    entries: 3000\n    \
                      isl: {mean: 256, stddev: 50}\n    osl: {mean: 128, stddev: 25}\n  profiling:\n    \
                      type: poisson\n    duration: 2m\n    rate: 20.0\n    concurrency: 100\n    gracePeriod: 60\n  \
                      artifacts:\n    dir: ./artifacts/latency_test\n";
        assert_same(
            config,
            "model: m\nurl: http://localhost:8000/v1/chat/completions\nendpoint-type: chat\nstreaming: true\n\
             request-timeout-seconds: 600\nrandom-seed: 42\nnum-dataset-entries: 3000\nisl: 256\nisl-stddev: 50\n\
             osl: 128\nosl-stddev: 25\nrequest-rate: 20\nrequest-rate-mode: poisson\nconcurrency: 100\n\
             benchmark-duration: 120\nbenchmark-grace-period: 60\n",
        );
        let parsed = parse(config).expect("parses");
        assert_eq!(
            parsed.workload.stages[0].arrival,
            Arrival::AiperfRate {
                pace: AiperfPace::Poisson {
                    rate: 20.0,
                    seed: 42
                },
                concurrency: Some(100),
                grace: Some(Duration::from_secs(60)),
                warmup_requests: 0,
                sessions: None,
                credits: AiperfCredits::default(),
            }
        );
        assert_eq!(
            parsed.workload.request_timeout,
            Some(Duration::from_secs(600))
        );
        assert!(
            parsed
                .warnings
                .iter()
                .any(|w| w.key == "benchmark.artifacts" && w.line == Some(21))
        );
    }

    #[test]
    fn a_duration_phase_without_grace_waits_for_every_response() {
        let w = parse(
            "benchmark:\n  model: m\n  endpoint: {url: http://x}\n  dataset: {entries: 5}\n  \
             profiling: {type: constant, rate: 4, duration: 30s}\n",
        )
        .expect("parses")
        .workload;
        assert!(matches!(
            w.stages[0].arrival,
            Arrival::AiperfRate { pace: AiperfPace::Constant { rate }, grace: None, .. } if rate == 4.0
        ));
        assert_eq!(
            w.stages[0].limit,
            StageLimit::duration(Duration::from_secs(30))
        );
    }

    #[test]
    fn a_warmup_paced_like_profiling_is_the_warmup_request_count() {
        let phases = "  phases:\n    - {name: warmup, type: poisson, rate: 5, requests: 7}\n    \
                      - {name: profiling, type: poisson, rate: 5.0, requests: 20}\n";
        let head =
            "benchmark:\n  model: m\n  endpoint: {url: http://x}\n  dataset: {entries: 10}\n";
        assert_same(
            &format!("{head}{phases}"),
            "model: m\nurl: http://x\nnum-dataset-entries: 10\nrequest-rate: 5\nrequest-count: 20\n\
             warmup-request-count: 7\n",
        );
        // AIPerf's `warmup_profiling.yaml` shape: a concurrency warm-up before a rate phase.
        let err = refusal(&format!(
            "{head}  warmup: {{type: concurrency, concurrency: 8, requests: 100}}\n  \
             profiling: {{type: poisson, rate: 50, requests: 10}}\n"
        ));
        assert!(
            err.starts_with("bench.yaml:5: `benchmark.warmup`: a warm-up phase paced unlike the profiling phase \
                             (concurrency, rate unset, concurrency 8 against poisson, rate 50, concurrency unset"),
            "{err}"
        );
        let err = refusal(&format!(
            "{head}  warmup: {{type: poisson, rate: 5, duration: 10}}\n  profiling: {{type: poisson, rate: 5, requests: 10}}\n"
        ));
        assert!(
            err.contains("`benchmark.warmup`: a warm-up phase bounded by duration"),
            "{err}"
        );
    }

    #[test]
    fn slos_extra_and_headers_are_the_goodput_extra_inputs_and_header_flags() {
        assert_same(
            "benchmark:\n  model: m\n  endpoint:\n    url: http://x\n    streaming: true\n    \
             extra: {ignore_eos: true, temperature: 0.5}\n    \
             headers: {X-Tenant: a:b}\n  dataset: {entries: 3}\n  profiling: {type: concurrency, requests: 3}\n  \
             slos: {time_to_first_token: 500, request_latency: 5000}\n",
            "model: m\nurl: http://x\nstreaming: true\nextra-inputs: '{\"ignore_eos\": true, \"temperature\": 0.5}'\n\
             header: '{\"X-Tenant\": \"a:b\"}'\nnum-dataset-entries: 3\nrequest-count: 3\n\
             goodput: time_to_first_token:500 request_latency:5000\n",
        );
    }

    #[test]
    fn a_sampling_strategy_runs_synthetic_entries_through_aiperfs_samplers() {
        let config = "benchmark:\n  model: m\n  endpoint: {url: http://x}\n  \
                      dataset: {entries: 4, sampling: random, isl: 20}\n  profiling: {type: concurrency, requests: 6}\n";
        assert_same(
            config,
            "model: m\nurl: http://x\nnum-dataset-entries: 4\nisl: 20\nrequest-count: 6\n\
             dataset-sampling-strategy: random\n",
        );
        // Single-turn conversations, so each session's entry is the sampler's pick.
        let w = parse(config).expect("parses").workload;
        assert!(
            matches!(
                &w.data,
                DataSpec::AiperfConversations(c) if c.conversations == 4
                    && c.sampling == AiperfSamplingStrategy::Random
                    && c.turns == TokenLengths::fixed(1)
            ),
            "{:?}",
            w.data
        );
        let err = refusal(
            "benchmark:\n  model: m\n  endpoint: {url: http://x}\n  \
             dataset: {type: file, path: t.jsonl, format: mooncake_trace, sampling: shuffle}\n  \
             profiling: {type: concurrency, requests: 6}\n",
        );
        assert!(err.starts_with("bench.yaml:4: `benchmark.dataset.sampling`: a random or shuffle sampler over a mooncake trace"), "{err}");
    }

    #[test]
    fn a_fixed_schedule_phase_is_the_fixed_schedule_flags_with_auto_offset_on_by_default() {
        let head = "benchmark:\n  model: m\n  endpoint: {url: http://x}\n  \
                    dataset: {type: file, path: t.jsonl, format: mooncake_trace}\n";
        // `FixedSchedulePhase.auto_offset` defaults to true (the CLI flag's default is false).
        assert_same(
            &format!("{head}  profiling: {{type: fixed_schedule}}\n"),
            "model: m\nurl: http://x\ninput-file: t.jsonl\ncustom-dataset-type: mooncake_trace\n\
             fixed-schedule: true\nfixed-schedule-auto-offset: true\n",
        );
        assert_same(
            &format!(
                "{head}  profiling: {{type: fixed_schedule, autoOffset: false, startOffset: 100, endOffset: 900}}\n"
            ),
            "model: m\nurl: http://x\ninput-file: t.jsonl\ncustom-dataset-type: mooncake_trace\n\
             fixed-schedule: true\nfixed-schedule-auto-offset: false\nfixed-schedule-start-offset: 100\n\
             fixed-schedule-end-offset: 900\n",
        );
        // `_validate_fixed_schedule_constraints`: auto_offset (true unless said) with a start offset.
        let err = refusal(&format!(
            "{head}  profiling: {{type: fixed_schedule, startOffset: 100}}\n"
        ));
        assert!(
            err.contains("fixed-schedule-auto-offset") || err.contains("autoOffset"),
            "{err}"
        );
        // Over synthetic data there is no trace to follow.
        let err = refusal(
            "benchmark:\n  model: m\n  endpoint: {url: http://x}\n  dataset: {entries: 3}\n  \
             profiling: {type: fixed_schedule}\n",
        );
        assert!(err.contains("need a trace"), "{err}");
    }

    #[test]
    fn every_refusal_names_the_config_key_and_its_line() {
        let head = "benchmark:\n  model: m\n  endpoint:\n    url: http://x\n";
        let tail = "  dataset: {entries: 3}\n  profiling: {type: poisson, rate: 2, requests: 3}\n";
        // A near miss of a key AIPerf knows: AIPerf's own error, with the key meant.
        let err = refusal(&format!("{head}    streamming: true\n{tail}"));
        assert!(
            err.starts_with(
                "bench.yaml:5: `benchmark.endpoint.streamming`: not a key of AIPerf 0.13's config"
            ) && err.contains("did you mean `streaming`?"),
            "{err}"
        );
        let err = refusal(&format!("{head}{tail}  profilng: {{}}\n"));
        assert!(
            err.contains("bench.yaml:7: `benchmark.profilng`")
                && err.contains("did you mean `profiling`?"),
            "{err}"
        );
        // A key AIPerf acts on that llmbench does not run: refused by name.
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3}}\n  profiling:\n    type: poisson\n    rate: 2\n    requests: 3\n    \
             burstPhaseStarts: true\n"
        ));
        assert!(
            err.starts_with(
                "bench.yaml:10: `benchmark.profiling.burstPhaseStarts`: the AIPerf phase key"
            ),
            "{err}"
        );
        let err = refusal(&format!("{head}    urlStrategy: random\n{tail}"));
        assert!(
            err.starts_with("bench.yaml:5: `benchmark.endpoint.urlStrategy`"),
            "{err}"
        );
        // The flags' own checks, named by the config key.
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3}}\n  profiling: {{type: poisson, rate: -2, requests: 3}}\n"
        ));
        assert!(
            err.starts_with("bench.yaml:6: `benchmark.profiling.rate`: must be greater than 0"),
            "{err}"
        );
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3}}\n  profiling: {{type: fixed_schedule, requests: 3}}\n"
        ));
        assert!(
            err.starts_with(
                "bench.yaml:6: `benchmark.profiling`: the fixed-schedule options need a trace"
            ),
            "{err}"
        );
        // A user-centric phase is the user-centric flags, checked as they are.
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3}}\n  profiling: {{type: user_centric, rate: 2, users: 2, requests: 3}}\n"
        ));
        assert!(err.contains("requires --session-turns-mean >= 2"), "{err}");
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3}}\n  profiling: {{type: poisson, rate: 2, smoothness: 2, requests: 3}}\n"
        ));
        assert!(
            err.starts_with("bench.yaml:6: `benchmark.profiling.smoothness`: a `poisson` phase has no `smoothness`"),
            "{err}"
        );
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3}}\n  profiling: {{type: poisson, rate: 2}}\n"
        ));
        assert!(
            err.contains("at least one of 'requests', 'duration', or 'sessions'"),
            "{err}"
        );
        // Templates are rendered by AIPerf at load time from `variables:` and the environment.
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3}}\n  profiling: {{type: poisson, rate: \"{{{{ r }}}}\", requests: 3}}\n"
        ));
        assert!(
            err.starts_with("bench.yaml:6: `benchmark.profiling.rate`: AIPerf's Jinja2 templates"),
            "{err}"
        );
        let err = refusal(&format!("{head}{tail}sweep: {{type: grid}}\n"));
        assert!(
            err.starts_with("bench.yaml:7: `sweep`: AIPerf's `sweep`"),
            "{err}"
        );
        let err = refusal(&format!(
            "{head}  dataset: {{entries: 3, sampling: shufle}}\n  profiling: {{type: poisson, rate: 2, requests: 3}}\n"
        ));
        assert!(err.starts_with("bench.yaml:5: `benchmark.dataset.sampling`: `shufle` is not a dataset sampling strategy"), "{err}");
    }
}
