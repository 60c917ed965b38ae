//! Which Prometheus endpoints a run scrapes, and for how long after its last request.
//!
//! In order: `--metrics-endpoint` (a BenchmarkRun's `stack.metricsEndpoints` reach the launcher this way), and the
//! Prometheus server an inference-perf profile's `metrics:` names, read through its `/federate` endpoint. With
//! neither, the run's own endpoint's `/metrics` when it answers with Prometheus text (vLLM and llm-d-inference-sim
//! serve theirs on the API port; a gateway usually does not). `--no-server-metrics` turns all of it off.

use std::time::Duration;

use super::target::{self, EndpointError};
use llmbench_workload::workload::PrometheusSource;

/// Series a federated Prometheus server is asked for: those of every engine and router the summaries know (the
/// server-metrics catalogue's prefixes) rather than everything the server holds.
pub(crate) fn federate_selector() -> String {
    format!(
        "__name__=~\"{}\"",
        llmbench_metrics::server_metrics::catalogue::federate_name_pattern()
    )
}

/// inference-perf's `PROMETHEUS_SCRAPE_BUFFER_SEC`: after the run it waits the server's scrape interval plus this
/// before it queries, so the last requests are in the server's samples.
pub(crate) const PROMETHEUS_SCRAPE_BUFFER: Duration = Duration::from_secs(2);

pub(crate) use llmbench_metrics::server_metrics::ScrapePlan;

/// The plan from the flags, the run's endpoint and the profile's Prometheus server; `None` when nothing is to be
/// scraped.
pub(crate) fn plan(
    flags: &[String],
    off: bool,
    interval: Duration,
    endpoint: &str,
    profile: Option<&PrometheusSource>,
) -> Result<Option<ScrapePlan>, EndpointError> {
    if off {
        return Ok(None);
    }
    let mut targets = flags
        .iter()
        .map(|url| target::validate(url, "--metrics-endpoint"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut tail = Duration::ZERO;
    if let Some(source) = profile {
        targets.push(federate_url(source)?);
        tail = tail.max(source.scrape_interval + PROMETHEUS_SCRAPE_BUFFER);
    }
    targets.dedup();
    let default_target = if targets.is_empty() {
        Some(metrics_url_of(endpoint)?)
    } else {
        None
    };
    Ok(Some(ScrapePlan {
        targets,
        default_target,
        interval,
        tail,
    }))
}

/// `/metrics` on the endpoint's host and port (vLLM serves it at the root whatever the API's path).
pub(crate) fn metrics_url_of(endpoint: &str) -> Result<String, EndpointError> {
    let mut url = parse(endpoint, "the run's endpoint")?;
    url.set_path("/metrics");
    url.set_query(None);
    Ok(url.to_string())
}

/// A Prometheus server's federation URL for the series the summaries know, with the profile's label filters.
pub(crate) fn federate_url(source: &PrometheusSource) -> Result<String, EndpointError> {
    let mut url = parse(&source.url, "metrics.prometheus.url")?;
    let path = format!("{}/federate", url.path().trim_end_matches('/'));
    url.set_path(&path);
    let mut matchers = vec![federate_selector()];
    matchers.extend(source.filters.iter().cloned());
    url.query_pairs_mut()
        .append_pair("match[]", &format!("{{{}}}", matchers.join(",")));
    Ok(url.to_string())
}

fn parse(url: &str, from: &str) -> Result<reqwest::Url, EndpointError> {
    let valid = target::validate(url, from)?;
    reqwest::Url::parse(&valid).map_err(|e| EndpointError::Invalid {
        url: url.to_owned(),
        from: from.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn without_flags_the_endpoints_own_metrics_is_probed() {
        let plan = plan(&[], false, SECOND, "http://vllm:8000/v1", None)
            .unwrap()
            .unwrap();
        assert!(plan.targets.is_empty());
        assert_eq!(
            plan.default_target.as_deref(),
            Some("http://vllm:8000/metrics")
        );
        assert_eq!(plan.tail, Duration::ZERO);
    }

    #[test]
    fn flags_replace_the_default_and_are_validated() {
        let flags = vec!["http://pod-a:8000/metrics".to_owned()];
        let plan = plan(&flags, false, SECOND, "http://gw", None)
            .unwrap()
            .unwrap();
        assert_eq!(plan.targets, ["http://pod-a:8000/metrics"]);
        assert_eq!(plan.default_target, None);
        let bad = vec!["ftp://x/metrics".to_owned()];
        let e = super::plan(&bad, false, SECOND, "http://gw", None).unwrap_err();
        assert!(e.to_string().contains("--metrics-endpoint"), "{e}");
    }

    #[test]
    fn off_scrapes_nothing() {
        assert_eq!(plan(&[], true, SECOND, "http://gw", None).unwrap(), None);
    }

    #[test]
    fn a_profiles_prometheus_server_is_federated_with_its_filters_and_waited_for() {
        let source = PrometheusSource {
            url: "http://prometheus:9090/prom".to_owned(),
            scrape_interval: Duration::from_secs(15),
            filters: vec!["namespace=\"llm-d\"".to_owned()],
        };
        let plan = plan(&[], false, SECOND, "http://gw", Some(&source))
            .unwrap()
            .unwrap();
        assert_eq!(plan.default_target, None);
        assert_eq!(plan.targets.len(), 1);
        let url = reqwest::Url::parse(&plan.targets[0]).unwrap();
        assert_eq!(url.path(), "/prom/federate");
        let matchers: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        assert_eq!(
            matchers,
            [(
                "match[]".to_owned(),
                "{__name__=~\"vllm:.+|vllm_.+|sglang:.+|trtllm_.+|trtllm:.+|nv_trt_llm_.+|nv_llm_.+|tgi_.+|\
                 llamacpp:.+|nv_inference_.+|llm_d_epp_.+|inference_.+\",namespace=\"llm-d\"}"
                    .to_owned()
            )]
        );
        // inference-perf waits scrape_interval + 2 s after the run.
        assert_eq!(plan.tail, Duration::from_secs(17));
    }
}
