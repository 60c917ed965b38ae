//! LoadGen's early stopping (`loadgen/early_stopping.cc`, `results.cc::EarlyStopping`, Server case): with t
//! queries over the latency limit, find the least h such that, were the true over-limit rate exactly 1 − p, seeing
//! at most t over-limit queries among h + t would be less likely than 1 − c (c = 0.99 confidence). The run passes
//! when it issued at least h + t queries; otherwise it would need `h + t − issued` more, all under the limit.
//!
//! The binomial tail is LoadGen's: the regularized incomplete beta through its a = 1 hypergeometric series, with
//! `lgamma`; the search is its binary search between slope bounds, so h matches LoadGen's to the query.

use std::collections::BTreeMap;

fn lbeta(x: i64, y: i64) -> f64 {
    libm::lgamma(x as f64) + libm::lgamma(y as f64) - libm::lgamma((x + y) as f64)
}

/// ₂F₁(1, b; c; x), summed until a term falls below 2^−33.
fn hypergeometric_2f1_a1(b: i64, c: i64, x: f64) -> f64 {
    const TOLERANCE: f64 = 1.0 / (1u64 << 33) as f64;
    let mut term = 1.0f64;
    let mut result = 1.0f64;
    let mut i: i64 = 0;
    while term.abs() > TOLERANCE {
        // LoadGen multiplies in this order: ((b + i) · x) / (c + i).
        term *= (b + i) as f64 * x / (c + i) as f64;
        result += term;
        i += 1;
    }
    result
}

/// BetaRegularized[x, a, b].
fn beta_regularized(x: f64, a: i64, b: i64) -> f64 {
    (a as f64 * x.ln() + (b - 1) as f64 * (1.0 - x).ln() - lbeta(a, b)).exp() / a as f64
        * hypergeometric_2f1_a1(1 - b, 1 + a, x / (x - 1.0))
}

/// The probability of t or fewer over-limit queries among h + t when each is under the limit with probability
/// p − d.
fn odds(h: i64, t: i64, p: f64, d: f64) -> f64 {
    beta_regularized(p - d, h, 1 + t)
}

/// The least h in [min_h, max_h] with `odds(h, t, p, d) < 1 − c`.
fn find_min_passing(mut min_h: i64, max_h: i64, t: i64, p: f64, d: f64, c: f64) -> i64 {
    let mut count = max_h - min_h;
    while count > 0 {
        let step = count / 2;
        let h = min_h + step;
        if odds(h, t, p, d) < 1.0 - c {
            count = step;
        } else {
            min_h = h + 1;
            count -= step + 1;
        }
    }
    min_h
}

/// LoadGen's `MinPassingQueriesFinder`, cache included (it narrows the search bounds of later calls).
#[derive(Debug, Default)]
pub struct MinPassingQueriesFinder {
    caches: BTreeMap<(u64, u64, u64), BTreeMap<i64, i64>>,
}

impl MinPassingQueriesFinder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The least h such that `odds(h, t, p, d) ≤ 1 − c`.
    pub fn find(&mut self, t: i64, p: f64, d: f64, c: f64) -> i64 {
        let cache = self
            .caches
            .entry((p.to_bits(), d.to_bits(), c.to_bits()))
            .or_default();
        if let Some(h) = cache.get(&t) {
            return *h;
        }
        let (mut x0, mut y0, mut x1) = (-1i64, 0i64, 0i64);
        let mut y1 = ((1.0 - c).ln() / (p - d).ln()).ceil() as i64;
        // The two cached entries just below t, as LoadGen's `lower_bound` walk finds them.
        let mut below = cache.range(..t).rev();
        if let Some((x, y)) = below.next() {
            (x1, y1) = (*x, *y);
            if let Some((x, y)) = below.next() {
                (x0, y0) = (*x, *y);
            }
        }
        let min_slope = (p - d) / (1.0 - p + d);
        // LoadGen's expression, a product where a quotient may have been meant; it only widens the bound.
        let max_slope = ((y1 - y0) * (x1 - x0)) as f64;
        let min_h = ((t - x1) as f64 * min_slope + y1 as f64) as i64;
        let max_h = ((t - x1) as f64 * max_slope + y1 as f64 + 1.0) as i64;
        let h = find_min_passing(min_h, max_h, t, p, d, c);
        cache.insert(t, h);
        h
    }
}

/// The outcome of early stopping for one metric.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EarlyStopping {
    pub satisfied: bool,
    /// Queries over the limit (t).
    pub overlatency: u64,
    /// Queries needed under the limit beside them (h).
    pub min_passing: u64,
    /// LoadGen's message, e.g. " * Run successful.".
    pub message: String,
    /// SingleStream and MultiStream: the early-stopping estimate of the target percentile, in ns (LoadGen's
    /// `early_stopping_latency_ss`/`_ms`); `None` for Server or when too few queries ran.
    pub estimate: Option<u64>,
    /// SingleStream: the 99th-percentile estimate LoadGen computes next (`early_stopping_latency_ms`).
    pub multi_stream_estimate: Option<u64>,
}

/// Server early stopping for one metric: `latencies` (any order) against `limit_ns` at `percentile` (0.99),
/// with `queries_issued` queries. Over the limit means strictly greater, as LoadGen counts.
pub fn early_stopping(
    latencies: &[u64],
    limit_ns: u64,
    percentile: f64,
    queries_issued: u64,
) -> EarlyStopping {
    const CONFIDENCE: f64 = 0.99;
    const TOLERANCE: f64 = 0.0;
    let t = latencies.iter().filter(|l| **l > limit_ns).count() as i64;
    let h = MinPassingQueriesFinder::new().find(t, percentile, TOLERANCE, CONFIDENCE);
    let issued = i64::try_from(queries_issued).unwrap_or(i64::MAX);
    let satisfied = issued >= h + t;
    let message = if satisfied {
        " * Run successful.".to_string()
    } else {
        format!(
            " * Run unsuccessful.\n * Processed {issued} queries.\n * Would need to run at least {} more \
             queries,\n with the run being successful if every additional\n query were under latency.",
            h + t - issued
        )
    };
    EarlyStopping {
        estimate: None,
        multi_stream_estimate: None,
        satisfied,
        overlatency: t as u64,
        min_passing: h.max(0) as u64,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact binomial tail P[X ≤ t], X ~ Binomial(n, q) over-limit queries, summed term by term.
    fn binomial_cdf(t: i64, n: i64, q: f64) -> f64 {
        (0..=t)
            .map(|k| {
                let ln_choose = libm::lgamma((n + 1) as f64)
                    - libm::lgamma((k + 1) as f64)
                    - libm::lgamma((n - k + 1) as f64);
                (ln_choose + k as f64 * q.ln() + (n - k) as f64 * (1.0 - q).ln()).exp()
            })
            .sum()
    }

    #[test]
    fn with_no_overlatency_query_h_is_the_log_ratio() {
        // t = 0: odds(h) = 0.99^h < 0.01 ⇔ h > ln 0.01 / ln 0.99 = 458.21 ⇒ h = 459.
        // 0.99^458 = 0.01008 (not below 0.01), 0.99^459 = 0.009979.
        let es = early_stopping(&[], 1, 0.99, 459);
        assert_eq!(
            (es.overlatency, es.min_passing, es.satisfied),
            (0, 459, true)
        );
        assert_eq!(es.message, " * Run successful.");
    }

    #[test]
    fn h_is_where_the_binomial_tail_first_drops_below_one_percent() {
        // By definition h(t) is the least h with P[Binomial(h + t, 0.01) ≤ t] < 0.01. Check LoadGen's series
        // against the plain binomial sum at h and h − 1.
        let mut finder = MinPassingQueriesFinder::new();
        for t in [1, 2, 5, 10] {
            let h = finder.find(t, 0.99, 0.0, 0.99);
            assert!(binomial_cdf(t, h + t, 0.01) < 0.01, "t={t} h={h}");
            assert!(binomial_cdf(t, h - 1 + t, 0.01) >= 0.01, "t={t} h={h}");
        }
        // Worked by hand for t = 1: P(n) = 0.99^n + n·0.01·0.99^(n−1) with n = h + 1.
        // n = 661: 0.99^660 = e^(660·ln 0.99) = 0.0013156; P = 0.0013156·0.99 + 6.61·0.0013156 = 0.0100010 ≥ 0.01.
        // n = 662: 0.99^661 = 0.0013024;                    P = 0.0013024·0.99 + 6.62·0.0013024 = 0.0099140 < 0.01.
        // Hence h(1) = 661: a run with one query over the limit needs 662 queries.
        assert_eq!(finder.find(1, 0.99, 0.0, 0.99), 661);
    }

    #[test]
    fn overlatency_queries_pass_when_enough_queries_ran() {
        // t = 2 of 1000 over the limit. h(2) = 836 (P[Binomial(838, 0.01) ≤ 2] = 0.009951 < 0.01, while
        // P[Binomial(837, 0.01) ≤ 2] = 0.010031), so 838 queries suffice and 1000 pass.
        let mut latencies = vec![10u64; 998];
        latencies.extend([100, 100]);
        let es = early_stopping(&latencies, 50, 0.99, 1000);
        assert_eq!(
            (es.overlatency, es.min_passing, es.satisfied),
            (2, 836, true)
        );
        // The same two over the limit in 837 queries: one short.
        let es = early_stopping(
            &latencies[..837 - 2]
                .iter()
                .chain(&[100, 100])
                .copied()
                .collect::<Vec<_>>(),
            50,
            0.99,
            837,
        );
        assert!(!es.satisfied);
        assert!(
            es.message
                .contains("Would need to run at least 1 more queries"),
            "{}",
            es.message
        );
    }

    #[test]
    fn a_short_run_reports_how_many_more_queries_it_needs() {
        // 100 queries, none over: h(0) = 459, so 459 − 100 = 359 more.
        let es = early_stopping(&[10; 100], 50, 0.99, 100);
        assert!(!es.satisfied);
        assert_eq!(
            es.message,
            " * Run unsuccessful.\n * Processed 100 queries.\n * Would need to run at least 359 more queries,\n \
             with the run being successful if every additional\n query were under latency."
        );
    }
}
