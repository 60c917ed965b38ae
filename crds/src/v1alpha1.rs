//! `llmbench.dev/v1alpha1`: the `BenchmarkRun` and `WorkloadProfile` custom resources.
//!
//! Doc comments on fields become the CRD's descriptions (`kubectl explain`). Validation lives in the schema
//! (bounds, patterns, CEL rules), so `kubectl apply` rejects a bad spec before the operator sees it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements, SecretKeySelector, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::capacity::CapacitySearchSpec;
use crate::render::well_known;
pub use llmbench_core::harness::Harness;
pub use llmbench_core::slo::{SloFigures, SloSpec};
pub use llmbench_core::summary::v1::{
    HarnessVerdict, Latencies, LatencyStats, RunSummary, ServerSummary, Throughput,
};

mod experiment;
pub use experiment::*;

/// The default PVC that holds workload data and results, as in llm-d-benchmark.
pub const DEFAULT_PVC_NAME: &str = "workload-pvc";
/// The default size of a PVC that llmbench creates.
pub const DEFAULT_PVC_SIZE: &str = "20Gi";
/// Where the launcher pod mounts the workload volume (llm-d-benchmark's `/requests`).
pub const WORKLOAD_MOUNT_PATH: &str = "/requests";
/// The default run timeout.
pub(crate) const DEFAULT_TIMEOUT: &str = "3600s";

/// One execution of a benchmark against a serving stack. Like a Job, its spec is fixed once the run has
/// started; a new run is a new object.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "llmbench.dev",
    version = "v1alpha1",
    kind = "BenchmarkRun",
    doc = "A BenchmarkRun renders a workload profile, starts llmbench launcher pods against a serving stack and records the results summary in its status.",
    namespaced,
    status = "BenchmarkRunStatus",
    shortname = "br",
    category = "llmbench",
    derive = "PartialEq",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase", description = "Where the run is"),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Completed\")].reason",
        description = "Why the run is where it is: Preflight, Queued, StackStarting, WaitingForShards, Running, Merging, Succeeded, or the failure's reason (PreflightFailed, Timeout, …)"
    ),
    printcolumn(name = "Harness", type_ = "string", json_path = ".spec.harness", description = "Profile dialect"),
    printcolumn(
        name = "Req/s",
        type_ = "number",
        json_path = ".status.summary.throughput.requestsPerSecond",
        description = "Successful requests per second"
    ),
    printcolumn(
        name = "TTFT p99 ms",
        type_ = "number",
        json_path = ".status.summary.latencyMs.ttft.p99",
        description = "Time to first token, 99th percentile, in milliseconds"
    ),
    printcolumn(
        name = "Verdict",
        type_ = "string",
        json_path = ".status.summary.verdict.result",
        description = "The harness's own verdict, e.g. MLPerf's VALID or INVALID"
    ),
    printcolumn(
        name = "Failed %",
        type_ = "number",
        json_path = ".status.failurePercent",
        description = "Failed requests, in percent of those sent"
    ),
    printcolumn(
        name = "SLO",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"SLOMet\")].reason",
        description = "The SLO verdict: WithinSLO, SLOViolated or NoSummary, when the run has an SLO"
    ),
    printcolumn(
        name = "Capacity",
        type_ = "number",
        json_path = ".status.summary.capacity.answer",
        description = "The capacity search's answer: the highest load that met every objective"
    ),
    printcolumn(
        name = "Progress",
        type_ = "string",
        json_path = ".status.progress",
        description = "While the launchers send: requests finished of those planned"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(
        "!has(oldSelf.status) || !has(oldSelf.status.startTime) || self.spec == oldSelf.spec"
    ).message("spec is immutable once the run has started; create a new BenchmarkRun instead")
)]
#[x_kube(validation = Rule::new("!has(self.skipRun) || !self.skipRun || has(self.resultsDir)").message("skipRun collects earlier results: set resultsDir to their directory"))]
#[x_kube(validation = Rule::new("!(has(self.skipRun) && self.skipRun && has(self.stack.standalone))").message("skipRun collects earlier results and sends no load: a standalone stack would be started for nothing"))]
// The launchers cannot shard these: a collector reports on one directory, and LoadGen judges one process's queries.
#[x_kube(validation = Rule::new("!(has(self.skipRun) && self.skipRun && has(self.launcher) && has(self.launcher.parallelism) && self.launcher.parallelism > 1)").message("skipRun runs one collector pod: launcher.parallelism must be 1"))]
#[x_kube(validation = Rule::new("!(self.harness == 'mlperf' && has(self.launcher) && has(self.launcher.parallelism) && self.launcher.parallelism > 1)").message("the mlperf harness runs one LoadGen, which cannot be sharded: launcher.parallelism must be 1"))]
#[x_kube(validation = Rule::new("!(self.harness == 'fmperf' && has(self.launcher) && has(self.launcher.parallelism) && self.launcher.parallelism > 1)").message("the fmperf harness runs LMBenchmark's users in one step loop, which cannot be sharded: launcher.parallelism must be 1"))]
#[x_kube(validation = Rule::new("!(has(self.launcher) && has(self.launcher.parallelism) && self.launcher.parallelism > 1 && has(self.storage) && has(self.storage.emptyDir))").message("launcher.parallelism > 1 needs a PVC: each launcher pod's emptyDir is its own, so the merge could not read the shards' records"))]
#[x_kube(validation = Rule::new("!(has(self.launcher) && has(self.launcher.parallelism) && self.launcher.parallelism > 1 && has(self.storage) && has(self.storage.pvc) && has(self.storage.pvc.accessModes) && self.storage.pvc.accessModes.exists(m, m == 'ReadWriteOncePod'))").message("a ReadWriteOncePod claim admits one pod: launcher.parallelism > 1 needs ReadWriteMany (shards on any node) or ReadWriteOnce (shards on one node)"))]
#[x_kube(validation = Rule::new("self.harness == 'nop' || !has(self.stack.pods)").message("stack.pods is read by the nop harness only (its model-load times, from the serving pods' logs)"))]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkRunSpec {
    /// The profile dialect of the workload: inference-perf, guidellm, vllm-benchmark, inferencemax, aiperf, nop,
    /// mlperf or fmperf.
    pub harness: Harness,
    /// The workload profile: exactly one of profileRef, builtin or template.
    pub workload: WorkloadSource,
    /// The serving stack under test.
    pub stack: StackSpec,
    /// Extra values for REPLACE_ENV_<NAME> placeholders, keyed by NAME (without the REPLACE_ENV_ prefix). A name
    /// given here takes precedence over the value derived from stack and storage.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^[A-Za-z0-9_]+$'))").message("env names may only contain letters, digits and underscores"))]
    #[schemars(extend("maxProperties" = 256))]
    pub env: BTreeMap<String, String>,
    /// Profile overrides as key=value. A dotted key (load.stages.0.rate=5) is a path from the document root with
    /// integer list indexes; a bare key (total_count=200) sets every key of exactly that name at any depth. Values
    /// are typed like YAML scalars; quote them to keep a string. A key that matches nothing fails the run, the last
    /// key of a dotted path too (use overrideAdd to create a key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self.all(o, o.matches('^[^=.\\\\s]+(\\\\.[^=.\\\\s]+)*=.*$'))").message("each override must be key=value, with a key of non-empty dot-separated segments"))]
    // Bounds on the items keep the CEL rule's estimated cost inside the apiserver's budget.
    #[schemars(extend("maxItems" = 256), inner(length(max = 4096)))]
    pub overrides: Vec<String>,
    /// Profile keys to create, as key=value: the key is a path from the document root (data.input_distribution.std_dev=30),
    /// whose last key is created under a mapping that exists (or set, when it exists); a missing parent or an index
    /// past the end of a list fails the run. Applied before overrides, so an override or an experiment factor may
    /// set a key created here. The llmbench command line's --override-add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self.all(o, o.matches('^[^=.\\\\s]+(\\\\.[^=.\\\\s]+)*=.*$'))").message("each overrideAdd entry must be key=value, with a key of non-empty dot-separated segments"))]
    #[schemars(extend("maxItems" = 256), inner(length(max = 4096)))]
    pub override_add: Vec<String>,
    /// The launcher pods that generate the load.
    #[serde(default)]
    pub launcher: LauncherSpec,
    /// Where results are written: a PVC (default workload-pvc) or an emptyDir.
    #[serde(default)]
    pub storage: StorageSpec,
    /// How long the run may take, counted from its creation (so a run that can never start ends too), before its
    /// pods are deleted and it fails with reason Timeout, as a duration (e.g. 3600s, 90m, 1h30m). Default 3600s.
    #[serde(default = "default_timeout")]
    #[x_kube(validation = Rule::new("self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')").message("timeout must be a positive duration such as 3600s or 1h"))]
    #[schemars(
        regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"),
        length(max = 64)
    )]
    pub timeout: String,
    /// Delete the run this many seconds after it finished (Succeeded or Failed), as a Job's
    /// ttlSecondsAfterFinished does: its pods and ConfigMap go with it, its results on the PVC never do. Unset:
    /// the operator's default (the chart's ttlSecondsAfterFinished), else kept until deleted. A run an
    /// experiment owns is kept while the experiment is (the experiment's own TTL removes both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Collect what is already on the PVC instead of generating load: a collector pod runs `llmbench report` on
    /// resultsDir, which must then be set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_run: bool,
    /// The run's results directory on the workload volume, relative to its root (/requests). Default
    /// <run>-<first 8 characters of its uid>, unique per run. With skipRun, the directory of earlier results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!self.matches('(^|/)[.][.]?(/|$)')").message("resultsDir must be a relative path without '.' or '..' segments"))]
    #[schemars(
        regex(pattern = r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$"),
        length(min = 1, max = 253)
    )]
    pub results_dir: Option<String>,
    /// Service-level objectives on the run's 99th percentiles; the verdict becomes the SLOMet condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloSpec>,
    /// Search for the highest load that meets every objective instead of running the profile's load once: a
    /// ramp brackets the knee, bisection narrows it. The answer is in status.summary.capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_search: Option<CapacitySearchSpec>,
    /// The stack's prefix cache as the run meets it. Whatever this says, the run's synthetic prompts are new to
    /// the stack unless the profile pins them (its own seed, a dataset).
    #[serde(default, skip_serializing_if = "PrefixCacheSpec::is_default")]
    pub prefix_cache: PrefixCacheSpec,
}

/// What a run does to the stack's prefix cache before its clock starts.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PrefixCacheSpec {
    /// Empty the engine's prefix cache first (the launcher's --reset-prefix-cache): vLLM's POST
    /// /reset_prefix_cache (VLLM_SERVER_DEV_MODE=1), SGLang's POST /flush_cache or llama.cpp's slot erase
    /// (--slot-save-path), found by trying them in that order; a stack with none fails the run before it starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// Warm it first with the run's own prompts, each sent once and left out of every figure, so the run
    /// measures a cache that holds them (the launcher's --warm-prefix-cache).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warm: bool,
}

impl PrefixCacheSpec {
    pub(crate) fn is_default(&self) -> bool {
        *self == PrefixCacheSpec::default()
    }
}

fn default_timeout() -> String {
    DEFAULT_TIMEOUT.to_owned()
}

/// Where the workload profile comes from.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("[has(self.profileRef), has(self.builtin), has(self.template)].filter(x, x).size() == 1").message("exactly one of workload.profileRef, workload.builtin or workload.template must be set"))]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSource {
    /// A WorkloadProfile in the run's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_ref: Option<ProfileRef>,
    /// A profile of the bundled library, by name, for the run's harness (e.g. sanity_random).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.-]+$"), length(min = 1, max = 253))]
    pub builtin: Option<String>,
    /// An inline yaml.in template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 524288))]
    pub template: Option<String>,
}

/// A reference to a WorkloadProfile.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProfileRef {
    /// The WorkloadProfile's name, in the run's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The serving stack under test.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("[has(self.endpoint), has(self.serviceRef), has(self.standalone)].filter(x, x).size() == 1").message("exactly one of stack.endpoint, stack.serviceRef or stack.standalone must be set"))]
#[x_kube(validation = Rule::new("!(has(self.standalone) && has(self.pods))").message("stack.pods names the serving pods of a stack llmbench did not start; a standalone stack's pod is its own"))]
#[x_kube(validation = Rule::new("!has(self.pods) || has(self.serviceRef) || (has(self.pods.selector) && size(self.pods.selector) > 0)").message("stack.pods.selector is needed beside stack.endpoint: name the serving pods' labels (with stack.serviceRef, its Service's selector is the default)"))]
#[serde(rename_all = "camelCase")]
pub struct StackSpec {
    /// The stack's OpenAI-compatible base URL, e.g. http://llm-d-inference-gateway.llm-d.svc:80.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://[^\s]+$"), length(max = 2048))]
    pub endpoint: Option<String>,
    /// A Service in the run's namespace that fronts the stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ref: Option<ServiceRef>,
    /// The served model name sent in every request.
    #[schemars(length(min = 1, max = 512))]
    pub model: String,
    /// The tokenizer used to build prompts of exact token lengths (a Hugging Face model id); defaults to model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub tokenizer: Option<String>,
    /// The model's maximum context length in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_model_len: Option<u32>,
    /// Prometheus endpoints of the serving pods (or of the router) to scrape during the run, full URLs such as
    /// http://vllm-0.vllm:8000/metrics. The launcher scrapes them every second from just before the first request
    /// to just after the last, writes the samples to server_metrics.jsonl and summarizes them per stage in every
    /// report. Empty: the endpoint's own /metrics, when it answers with Prometheus text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 64), inner(regex(pattern = r"^https?://[^\s]+$"), length(max = 2048)))]
    pub metrics_endpoints: Vec<String>,
    /// A stack llmbench starts for this run, as llm-d-benchmark's standalone mode does: a Deployment (one replica)
    /// and a Service named `<run>-stack`, owned by the run. The launchers start once the Deployment is available;
    /// a stack that dies while they run fails the run (reason StackFailed) and keeps what was measured; both are
    /// deleted after the run unless `keep`. Instead of endpoint or serviceRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standalone: Option<StandaloneStack>,
    /// Profiling hooks around the measured phase (after warm-up): HTTP POSTs with an empty body, e.g. vLLM's
    /// /start_profile and /stop_profile. A hook that fails is recorded in run.json and warned about, never fatal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiling: Option<ProfilingSpec>,
    /// The serving pods of a stack llmbench did not start (endpoint or serviceRef), for what only their logs
    /// tell: the nop harness's model-load times. Without it, a serviceRef's pods are those its selector picks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<StackPods>,
}

/// Where an emptyDir run's kept results are ([`BenchmarkRunStatus::results_kept`]).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResultsKept {
    /// The ConfigMaps holding the gzipped tar of the results directory, in order (each under key `part`).
    pub config_maps: Vec<String>,
    /// The archive's size in bytes.
    pub bytes: u64,
    /// The run's directory as the archive names it (its entries are `<dir>/…`): the run id.
    pub dir: String,
}

/// The serving pods of a stack the user deployed, in the run's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StackPods {
    /// The pods' labels (all must match), e.g. `app: vllm`. Default: the selector of stack.serviceRef's Service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub selector: BTreeMap<String, String>,
    /// The container whose log is the engine's. Default: the pod's first container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub container: Option<String>,
}

/// The default standalone image: vLLM's OpenAI-compatible server, at the version llm-d-benchmark's standalone
/// defaults pin (`config/templates/values/defaults.yaml`, `vllm-openai_version`).
pub const DEFAULT_STANDALONE_IMAGE: &str = "docker.io/vllm/vllm-openai:v0.26.0";
/// The port a standalone stack listens on by default (vLLM's, and llm-d-benchmark's `standalone.vllm.port`).
pub(crate) const DEFAULT_STANDALONE_PORT: u16 = 8000;
/// How long a standalone stack may take to become ready by default: loading a large model's weights and
/// compiling take minutes.
pub(crate) const DEFAULT_STANDALONE_READY_TIMEOUT: &str = "15m";
/// The path a standalone stack's readiness probe asks by default (vLLM's and llm-d-benchmark's).
pub(crate) const DEFAULT_READINESS_PATH: &str = "/health";

/// A serving stack the run starts and owns.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StandaloneStack {
    /// The stack's image. Default docker.io/vllm/vllm-openai:v0.26.0 (llm-d-benchmark's standalone default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,
    /// The container's command. Default `vllm serve` when args are not given either; with args and no command,
    /// the image's entrypoint runs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 64), inner(length(max = 4096)))]
    pub command: Vec<String>,
    /// The container's arguments. Default, as llm-d-benchmark's standalone `vllm serve` command: `<model> --host
    /// 0.0.0.0 --port <port> --served-model-name <model>`, then `--max-model-len <stack.maxModelLen>` when set and
    /// `--tensor-parallel-size <tensorParallelSize>` when set. Given, they replace that list entirely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxItems" = 256), inner(length(max = 4096)))]
    pub args: Option<Vec<String>>,
    /// vLLM's --tensor-parallel-size, in the default args. It does not request GPUs: set resources for that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub tensor_parallel_size: Option<u32>,
    /// Engine flags appended to the args (default or given), e.g. ["--enable-prefix-caching",
    /// "--gpu-memory-utilization", "0.9"].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 256), inner(length(max = 4096)))]
    pub extra_args: Vec<String>,
    /// The port the server listens on, and the Service's. Default 8000.
    #[serde(default = "default_standalone_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// Environment variables of the server container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 256))]
    pub env: Vec<EnvVar>,
    /// The server container's resources, e.g. limits {nvidia.com/gpu: 1}. None by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Node labels the stack's pod must be scheduled on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the stack's pod (e.g. of GPU nodes' taints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 64))]
    pub tolerations: Vec<Toleration>,
    /// When the stack counts as ready, and how long it may take.
    #[serde(default)]
    pub readiness: ReadinessSpec,
    /// Keep the Deployment and Service after the run (they are still deleted with the run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
}

fn default_standalone_port() -> u16 {
    DEFAULT_STANDALONE_PORT
}

/// A standalone stack's readiness: the pod's readinessProbe (an HTTP GET of `path` on the port), then the
/// launcher's own probe of GET /v1/models before it sends load.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessSpec {
    /// The readinessProbe's path. Default /health.
    #[serde(default = "default_readiness_path")]
    #[schemars(regex(pattern = r"^/[^\s]*$"), length(max = 1024))]
    pub path: String,
    /// How long the stack may take to become available, from when it was created, before the run fails with
    /// reason StackNotReady. A duration such as 15m. Default 15m. The run's own timeout still applies.
    #[serde(default = "default_ready_timeout")]
    #[x_kube(validation = Rule::new("self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')").message("readiness.timeout must be a positive duration such as 15m"))]
    #[schemars(
        regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"),
        length(max = 64)
    )]
    pub timeout: String,
}

impl Default for ReadinessSpec {
    fn default() -> Self {
        ReadinessSpec {
            path: default_readiness_path(),
            timeout: default_ready_timeout(),
        }
    }
}

fn default_readiness_path() -> String {
    DEFAULT_READINESS_PATH.to_owned()
}

fn default_ready_timeout() -> String {
    DEFAULT_STANDALONE_READY_TIMEOUT.to_owned()
}

/// Profiling hooks the launchers call around the measured phase: `llmbench run --profiler-start/--profiler-stop`
/// (or `--vllm-profiler`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("!(has(self.vllm) && self.vllm && (has(self.start) || has(self.stop)))").message("set profiling.vllm or profiling.start/stop, not both"))]
#[serde(rename_all = "camelCase")]
pub struct ProfilingSpec {
    /// vLLM's profiler: POST /start_profile before and /stop_profile after the measured phase (the server must
    /// run with VLLM_TORCH_PROFILER_DIR set).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vllm: bool,
    /// The hook called before the measured phase: a URL, or a path relative to the stack's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub start: Option<String>,
    /// The hook called after the measured phase: a URL, or a path relative to the stack's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub stop: Option<String>,
}

/// A Service that fronts the stack.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ServiceRef {
    /// The Service's name, in the run's namespace.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// The Service port.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
}

/// The launcher pods.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LauncherSpec {
    /// The launcher image; defaults to the operator's own image at its own version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// CPU and memory for each launcher pod; the defaults are sized for the llmbench launcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The ServiceAccount the launcher pods run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Node labels the launcher pods must be scheduled on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the launcher pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 64))]
    pub tolerations: Vec<Toleration>,
    /// A Secret key holding the Hugging Face token (for gated tokenizers); passed to the pod as HF_TOKEN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token_secret_ref: Option<SecretKeySelector>,
    /// How many launcher pods share the load (each sends 1/parallelism of it). At least 1. With more than one, a
    /// merge pod merges their records into the run's exact summary once all have succeeded.
    #[serde(default = "default_parallelism")]
    #[schemars(range(min = 1, max = 1024))]
    pub parallelism: i32,
    /// Keep a sleeping launcher pod for inspection instead of running; nothing is collected.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub debug: bool,
    /// With parallelism > 1: how long the shards may take to become ready (scheduled, started, prompts built)
    /// before the run fails with reason ShardsNotReady. The operator releases every shard at one instant once all
    /// are ready, so they share one timeline. A duration such as 10m. Default 10m.
    #[serde(default = "default_start_timeout")]
    #[x_kube(validation = Rule::new("self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')").message("startTimeout must be a positive duration such as 10m"))]
    #[schemars(
        regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"),
        length(max = 64)
    )]
    pub start_timeout: String,
}

impl Default for LauncherSpec {
    fn default() -> Self {
        Self {
            image: None,
            resources: None,
            service_account_name: None,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            hf_token_secret_ref: None,
            parallelism: default_parallelism(),
            debug: false,
            start_timeout: default_start_timeout(),
        }
    }
}

fn default_parallelism() -> i32 {
    1
}

/// `launcher.startTimeout`'s default.
pub(crate) const DEFAULT_START_TIMEOUT: &str = "10m";

fn default_start_timeout() -> String {
    DEFAULT_START_TIMEOUT.to_owned()
}

/// Where results are written.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("!(has(self.pvc) && has(self.emptyDir))").message("set at most one of storage.pvc or storage.emptyDir"))]
#[serde(rename_all = "camelCase")]
pub struct StorageSpec {
    /// A PersistentVolumeClaim, created if absent and reused if present; llmbench never deletes it. The default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<PvcSpec>,
    /// A scratch emptyDir instead of a PVC: results live only as long as the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirSpec>,
}

impl StorageSpec {
    /// The PVC the run uses, or `None` for emptyDir.
    pub fn pvc_name(&self) -> Option<&str> {
        match (&self.pvc, &self.empty_dir) {
            (Some(pvc), _) => Some(pvc.name.as_str()),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_PVC_NAME),
        }
    }
}

/// The workload PVC.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PvcSpec {
    /// The claim's name. Default workload-pvc.
    #[serde(default = "default_pvc_name")]
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The requested size when llmbench creates the claim. Default 20Gi.
    #[serde(default = "default_pvc_size")]
    pub size: String,
    /// The StorageClass of a claim llmbench creates; the cluster default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// Access modes of a claim llmbench creates. Default [ReadWriteOnce]. With parallelism > 1, a claim without
    /// ReadWriteMany makes the operator schedule every shard on one node (required pod affinity), since only pods
    /// on one node can share a ReadWriteOnce volume; ReadWriteMany (where the StorageClass supports it) lets
    /// shards spread over nodes. The modes of an existing claim are read from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self.all(m, m in ['ReadWriteOnce', 'ReadWriteMany', 'ReadWriteOncePod'])").message("accessModes may be ReadWriteOnce, ReadWriteMany or ReadWriteOncePod: the launchers write their results"))]
    #[schemars(extend("maxItems" = 4))]
    pub access_modes: Vec<String>,
}

fn default_pvc_name() -> String {
    DEFAULT_PVC_NAME.to_owned()
}

fn default_pvc_size() -> String {
    DEFAULT_PVC_SIZE.to_owned()
}

/// A scratch emptyDir volume.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EmptyDirSpec {
    /// The volume's size limit, e.g. 10Gi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_limit: Option<String>,
}

/// Where a run is.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Phase {
    /// Accepted; the profile is being rendered and the launcher created.
    #[default]
    Pending,
    /// The launcher pods are running.
    Running,
    /// The launchers finished; results are being collected.
    Collecting,
    /// The run finished and its summary is in status.
    Succeeded,
    /// The run failed; the Completed condition says why.
    Failed,
}

/// The observed state of a BenchmarkRun.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkRunStatus {
    /// Where the run is: Pending, Running, Collecting, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// ProfileRendered, LauncherStarted, Completed, Failed, SLOMet and Reconciled, at most one of each type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    // A map keyed by type: server-side apply merges conditions by type, and the API server refuses duplicates.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the launcher pods were created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// For a run queued through Kueue (label kueue.x-k8s.io/queue-name): when the operator saw its launchers
    /// admitted (their scheduling gates removed). Its timeout and launcher.startTimeout count from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_time: Option<Time>,
    /// When the run finished, successfully or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The ConfigMap that holds the rendered profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_config_map: Option<String>,
    /// The launcher pods of the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launcher_pods: Vec<String>,
    /// The run's results directory on the workload volume, e.g. workload-pvc:/requests/<run-id>.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_path: Option<String>,
    /// An emptyDir run's results, kept after its pod went: the launcher wrote them (capped, largest files left out
    /// first) into its log, and the operator keeps that archive in ConfigMaps owned by the run, which `llmbench
    /// results fetch` reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_kept: Option<ResultsKept>,
    /// While the launchers send: requests finished (warm-ups included) of those planned, from the launchers' live
    /// metrics, e.g. `42% (420/1000)`, or `420 finished` for a run bounded by time (the Progress column). Cleared
    /// once the run is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Failed requests in percent of the requests sent, from the summary, rounded to 0.01 (the Failed % column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_percent: Option<f64>,
    /// The launcher's summary of the run. With several launcher pods: the merge pod's (`llmbench report` on the
    /// results directory), exact over every shard's records; should the merge leave no summary, counts and
    /// throughputs summed over the shards, latency means weighted by requests and percentiles the worst shard's
    /// (an upper bound), with a condition saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<RunSummary>,
    /// Each launcher pod's own summary, when the run has more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardSummary>,
    /// With more than one launcher pod: the instant the operator released every shard at, once all were ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseStatus>,
    /// The standalone stack the run started (spec.stack.standalone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackStatus>,
}

/// Where a run's standalone stack is.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StackStatus {
    /// The stack's Deployment.
    pub deployment: String,
    /// The stack's Service.
    pub service: String,
    /// The base URL the launchers were given, http://<service>.<namespace>.svc:<port>.
    pub url: String,
    /// The stack's image.
    pub image: String,
    /// Whether the Deployment has been available (its pod ready) since the launchers were started.
    pub ready: bool,
    /// The stack pod the launchers ran against, once it was ready: the heartbeat watches this very pod, so a pod
    /// replaced mid-run counts as the stack dying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The restarts of that pod's server container when the launchers started; one more during the run fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<i32>,
    /// Whether the Deployment and Service were deleted after the run (false while it runs, and with keep).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// How the shards of a run were released.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseStatus {
    /// The start instant every shard was given (RFC 3339, milliseconds).
    pub released_at: String,
    /// The same instant in nanoseconds since the Unix epoch, as the launchers were given it.
    pub at_unix_nanos: u64,
    /// Shards confirmed released (answering `released`, or already finished).
    pub confirmed: u32,
}

/// One launcher pod's summary.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShardSummary {
    /// The shard's index, 0 to parallelism − 1.
    pub index: u32,
    /// The launcher pod.
    pub pod: String,
    /// What the pod reported.
    pub summary: RunSummary,
}

impl BenchmarkRunSpec {
    /// The placeholder values this run supplies: the well-known names derived from `stack` and `storage`, then the
    /// run's own `env` on top. `namespace` completes a `serviceRef` endpoint.
    pub fn render_values(&self, namespace: &str) -> BTreeMap<String, String> {
        let mut values = BTreeMap::new();
        let stack = &self.stack;
        values.insert(well_known::MODEL.to_owned(), stack.model.clone());
        values.insert(
            well_known::TOKENIZER.to_owned(),
            stack
                .tokenizer
                .clone()
                .unwrap_or_else(|| stack.model.clone()),
        );
        if let Some(len) = stack.max_model_len {
            values.insert(well_known::MAX_MODEL_LEN.to_owned(), len.to_string());
        }
        let endpoint = match (&stack.endpoint, &stack.service_ref) {
            (Some(url), _) => Some(url.trim_end_matches('/').to_owned()),
            (None, Some(svc)) => Some(format!("http://{}.{namespace}.svc:{}", svc.name, svc.port)),
            (None, None) => None,
        };
        if let Some(url) = endpoint {
            values.insert(well_known::ENDPOINT_URL.to_owned(), url);
        }
        values.insert(
            well_known::DATASET_DIR.to_owned(),
            format!("{WORKLOAD_MOUNT_PATH}/datasets"),
        );
        if let Some(pvc) = self.storage.pvc_name() {
            values.insert(well_known::PVC_NAME.to_owned(), pvc.to_owned());
        }
        values.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        values
    }
}

/// A workload profile template kept in the cluster, for runs to reference by name.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "llmbench.dev",
    version = "v1alpha1",
    kind = "WorkloadProfile",
    doc = "A WorkloadProfile is a yaml.in workload template that BenchmarkRuns reference by name.",
    namespaced,
    status = "WorkloadProfileStatus",
    shortname = "wp",
    category = "llmbench",
    derive = "PartialEq",
    printcolumn(
        name = "Harness",
        type_ = "string",
        json_path = ".spec.harness",
        description = "Profile dialect"
    ),
    printcolumn(
        name = "Renders",
        type_ = "boolean",
        json_path = ".status.rendersWithDefaults",
        description = "Whether the template renders with its parameter defaults"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadProfileSpec {
    /// The profile dialect of the template.
    pub harness: Harness,
    /// The yaml.in template text, with REPLACE_ENV_<NAME> placeholders.
    #[schemars(length(min = 1, max = 524288))]
    pub template: String,
    /// What the profile measures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The placeholders a run may set, with defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 128))]
    pub parameters: Vec<ProfileParameter>,
}

/// A documented placeholder of a WorkloadProfile.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProfileParameter {
    /// The placeholder name, without the REPLACE_ENV_ prefix.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_]+$"))]
    pub name: String,
    /// The value used when a run does not set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// What the parameter means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The observed state of a WorkloadProfile.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadProfileStatus {
    /// The placeholder names the template uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placeholders: Vec<String>,
    /// Whether the template renders to valid YAML with its parameter defaults and standard stack values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renders_with_defaults: Option<bool>,
    /// Why the template does not render, when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
