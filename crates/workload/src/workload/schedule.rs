//! Arrival schedules: each tool's arrival process turned into send times before the stage starts
//! (FORMATS 3.8), so the clock is separate from the work and a seed reproduces the run.
//!
//! The generator is Xoshiro256++ seeded through `SeedableRng::seed_from_u64`: a fixed, documented
//! algorithm, so a seed gives the same times on every platform and rand version. The tools' own
//! generators (numpy, Python `random`) cannot be reproduced bit for bit; the processes are.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, Exp1, Gamma, Poisson};

use super::model::{AiperfCredits, AiperfPace, Arrival, RampUp, Rate, Stage, Sweep};

/// More arrivals than this are never precomputed (≈160 MB of times); a stage that asks for
/// more is cut here and a warning is logged.
pub const MAX_ARRIVALS: u64 = 10_000_000;

/// What the engine runs for one stage.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Send at these offsets from the stage start (sorted). `max_in_flight` caps requests in
    /// flight on top of the times (vllm `--max-concurrency`, guidellm `max_concurrency`).
    Open {
        send_at: Vec<Duration>,
        max_in_flight: Option<u32>,
    },
    /// Keep `concurrency` requests in flight until `total` were sent or `duration` passed
    /// (whichever first); the first `concurrency` starts are spread over `rampup`.
    Closed {
        concurrency: u32,
        total: Option<u64>,
        duration: Option<Duration>,
        rampup: Duration,
    },
    /// AIPerf's request-rate loop ([`Arrival::AiperfRate`]): a send at the end of each of `pace`'s intervals that
    /// finds one of `max_in_flight` slots free, until `total` were sent or `duration` passed; `grace` after the
    /// duration, what is still in flight is cancelled.
    Paced {
        pace: AiperfPace,
        max_in_flight: Option<u32>,
        total: Option<u64>,
        duration: Option<Duration>,
        grace: Option<Duration>,
        /// A warm-up phase of this many sends first, paced alike by a generator of its own.
        warmup: u64,
        /// AIPerf's session count (`--conversation-num` over conversations): no new session after this many.
        sessions: Option<u64>,
        /// Prefill slots and request cancellation.
        credits: AiperfCredits,
    },
    /// Rates depend on measurements; run the measuring phase, then `Sweep::stages`.
    Sweep(Sweep),
    /// A Mooncake trace: its times are in the trace file, read when the run starts (the `trace` module).
    Trace,
}

/// Derives a stage's seed from the workload seed, so stages differ but stay reproducible.
pub fn stage_seed(workload_seed: u64, stage_index: usize) -> u64 {
    // SplitMix64 finaliser over the pair.
    let mut z = workload_seed
        .wrapping_add((stage_index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The schedule of one stage. Pure: the same stage and seed give the same schedule.
pub fn schedule(stage: &Stage, seed: u64) -> Schedule {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let open = |send_at: Vec<f64>| Schedule::Open {
        send_at: send_at.into_iter().map(secs).collect(),
        max_in_flight: stage.max_concurrency,
    };
    match &stage.arrival {
        Arrival::InferencePerfConstant { rate, duration } => {
            let d = duration.as_secs_f64();
            open(normalized_exponential(&mut rng, count(rate * d), d, 0.0))
        }
        Arrival::InferencePerfPoisson { rate, duration } => open(inference_perf_poisson(
            &mut rng,
            *rate,
            duration.as_secs_f64(),
        )),
        Arrival::GuidellmConstant { rate, rampup } => {
            let (max_n, until) = bounds(stage);
            let ramp = rampup.as_secs_f64();
            let ramp_n = rate * ramp / 2.0;
            let mut times = Vec::new();
            for i in 1..=max_n {
                let i = i as f64;
                // guidellm's request index is 1-based: the first request is at 1/rate.
                let t = if ramp > 0.0 && i <= ramp_n {
                    (2.0 * ramp * i / rate).sqrt()
                } else if ramp > 0.0 {
                    ramp + (i - ramp_n) / rate
                } else {
                    i / rate
                };
                if t >= until {
                    break;
                }
                times.push(t);
            }
            open(times)
        }
        Arrival::GuidellmPoisson { rate } => {
            let (max_n, until) = bounds(stage);
            let mut times = Vec::new();
            let mut t = 0.0;
            while (times.len() as u64) < max_n {
                let gap: f64 = Exp1.sample(&mut rng);
                t += gap / rate;
                if t >= until {
                    break;
                }
                times.push(t);
            }
            open(times)
        }
        Arrival::VllmGamma {
            rate,
            burstiness,
            count: n,
        } => {
            let n = capped(*n);
            match rate {
                Rate::Infinite => open(vec![0.0; n as usize]),
                Rate::PerSecond(rate) => open(vllm_gamma(&mut rng, *rate, *burstiness, n)),
                Rate::RampUp(ramp) => open(vllm_ramp_up(&mut rng, ramp, *burstiness, n)),
            }
        }
        Arrival::Closed {
            concurrency,
            rampup,
        } => Schedule::Closed {
            concurrency: *concurrency,
            total: stage.limit.requests,
            duration: stage.limit.duration,
            rampup: *rampup,
        },
        Arrival::AiperfRate {
            pace,
            concurrency,
            grace,
            sessions,
            warmup_requests,
            credits,
        } => Schedule::Paced {
            pace: *pace,
            max_in_flight: *concurrency,
            total: stage.limit.requests,
            duration: stage.limit.duration,
            grace: *grace,
            warmup: *warmup_requests,
            sessions: *sessions,
            credits: credits.clone(),
        },
        Arrival::Sweep(sweep) => Schedule::Sweep(sweep.clone()),
        Arrival::MooncakeTrace { .. }
        | Arrival::InferencePerfTrace { .. }
        | Arrival::GuidellmReplay { .. }
        | Arrival::TraceSessions { .. } => Schedule::Trace,
    }
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// Python's `int(x)` for x ≥ 0, capped.
fn count(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        capped(x.floor() as u64)
    } else {
        0
    }
}

fn capped(n: u64) -> u64 {
    if n > MAX_ARRIVALS {
        tracing::warn!(
            requested = n,
            cap = MAX_ARRIVALS,
            "stage schedule cut to the arrival cap"
        );
        MAX_ARRIVALS
    } else {
        n
    }
}

/// (most requests, end time) of a guidellm rate stage from its constraints.
fn bounds(stage: &Stage) -> (u64, f64) {
    let max_n = capped(stage.limit.requests.unwrap_or(MAX_ARRIVALS));
    let until = stage
        .limit
        .duration
        .map_or(f64::INFINITY, |d| d.as_secs_f64());
    if stage.limit.requests.is_none() && stage.limit.duration.is_none() {
        tracing::warn!("rate stage without a duration or request limit; capped at {MAX_ARRIVALS}");
    }
    (max_n, until)
}

/// inference-perf's `ConstantLoadTimer`: n exponential gaps rescaled to sum to `span`, the
/// cumulative sums offset by `start`. The last arrival is exactly `start + span`.
fn normalized_exponential(rng: &mut Xoshiro256PlusPlus, n: u64, span: f64, start: f64) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let gaps: Vec<f64> = (0..n).map(|_| Exp1.sample(&mut *rng)).collect();
    let total: f64 = gaps.iter().sum();
    let scale = if total > 0.0 { span / total } else { 0.0 };
    let mut t = 0.0;
    let mut times: Vec<f64> = gaps
        .iter()
        .map(|g| {
            t += g * scale;
            (start + t).min(start + span)
        })
        .collect();
    if let Some(last) = times.last_mut() {
        *last = start + span;
    }
    times
}

/// inference-perf's `PoissonLoadTimer`, taking its first `int(rate·duration)` arrivals: per 1-s
/// slot draw `k ~ Poisson(rate)`; an empty slot skips 1 s; otherwise k normalised-exponential
/// arrivals fill the slot, the last at its end.
fn inference_perf_poisson(rng: &mut Xoshiro256PlusPlus, rate: f64, duration: f64) -> Vec<f64> {
    let total = count(rate * duration);
    let poisson = Poisson::new(rate).ok();
    let mut times = Vec::with_capacity(total as usize);
    let mut slot = 0.0;
    while (times.len() as u64) < total {
        let k = match &poisson {
            Some(p) => {
                let k: f64 = p.sample(&mut *rng);
                k as u64
            }
            None => rate.round() as u64,
        };
        if k == 0 {
            slot += 1.0;
            continue;
        }
        let needed = total - times.len() as u64;
        let slot_times = normalized_exponential(rng, k, 1.0, slot);
        times.extend(slot_times.into_iter().take(needed as usize));
        slot += 1.0;
    }
    times
}

/// vllm's `get_request`: gamma gaps (shape = burstiness, scale = 1/(rate·burstiness)), the
/// cumulative sum rescaled so the last of n arrivals is at exactly n/rate.
fn vllm_gamma(rng: &mut Xoshiro256PlusPlus, rate: f64, burstiness: f64, n: u64) -> Vec<f64> {
    let gamma = Gamma::new(burstiness, 1.0 / (rate * burstiness)).ok();
    let mut t = 0.0;
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            t += match &gamma {
                Some(g) if burstiness.is_finite() => g.sample(&mut *rng),
                // burstiness = inf: gamma degenerates to constant gaps.
                _ => 1.0 / rate,
            };
            t
        })
        .collect();
    let target = n as f64 / rate;
    if let Some(&last) = times.last()
        && last > 0.0
    {
        let factor = target / last;
        for x in &mut times {
            *x = (*x * factor).min(target);
        }
        if let Some(l) = times.last_mut() {
            *l = target;
        }
    }
    times
}

/// vllm bench serve's ramp-up (`get_request`): each gap drawn at its request's own rate (a constant `1/rate` when
/// burstiness is infinite), summed from the first gap on, and — unlike a fixed rate — not rescaled.
fn vllm_ramp_up(rng: &mut Xoshiro256PlusPlus, ramp: &RampUp, burstiness: f64, n: u64) -> Vec<f64> {
    let mut t = 0.0;
    (0..n)
        .map(|i| {
            let rate = ramp.rate(i, n);
            t += match Gamma::new(burstiness, 1.0 / (rate * burstiness)) {
                Ok(g) if burstiness.is_finite() => g.sample(&mut *rng),
                _ => 1.0 / rate,
            };
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::model::{AiperfPace, LoadKind, StageLimit};

    fn stage(arrival: Arrival, limit: StageLimit) -> Stage {
        Stage {
            load: LoadKind::Constant,
            arrival,
            limit,
            max_concurrency: None,
            warmup: None,
            cooldown: None,
        }
    }

    fn times(s: &Schedule) -> &[Duration] {
        match s {
            Schedule::Open { send_at, .. } => send_at,
            other => panic!("expected an open schedule, got {other:?}"),
        }
    }

    fn is_sorted(t: &[Duration]) -> bool {
        t.windows(2).all(|w| w[0] <= w[1])
    }

    fn ip_constant(rate: f64, secs: u64) -> Stage {
        let duration = Duration::from_secs(secs);
        stage(
            Arrival::InferencePerfConstant { rate, duration },
            StageLimit::duration(duration),
        )
    }

    #[test]
    fn inference_perf_constant_sends_int_rate_times_duration_within_the_duration() {
        for (rate, secs, expected) in [
            (1.0, 30, 30),
            (0.5, 120, 60),
            (2.5, 7, 17),
            (0.1, 30, 3),
            (45.0, 120, 5400),
        ] {
            let s = schedule(&ip_constant(rate, secs), 7);
            let t = times(&s);
            assert_eq!(t.len(), expected, "rate {rate} × {secs}s");
            assert!(is_sorted(t));
            assert!(*t.last().unwrap() <= Duration::from_secs(secs));
            // The gaps are rescaled to sum to the duration: the last arrival ends it.
            let last = t.last().unwrap().as_secs_f64();
            assert!((last - secs as f64).abs() < 1e-9, "last {last}");
        }
    }

    #[test]
    fn inference_perf_constant_below_one_request_sends_nothing() {
        assert!(times(&schedule(&ip_constant(0.01, 30), 1)).is_empty());
    }

    #[test]
    fn inference_perf_constant_gaps_are_random_not_even() {
        let s = schedule(&ip_constant(10.0, 10), 3);
        let t = times(&s);
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        let min = gaps.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = gaps.iter().cloned().fold(0.0, f64::max);
        assert!(
            max > 3.0 * min,
            "exponential gaps vary: min {min}, max {max}"
        );
    }

    #[test]
    fn same_seed_same_times_different_seed_different_times() {
        let stages = [
            ip_constant(5.0, 20),
            stage(
                Arrival::InferencePerfPoisson {
                    rate: 5.0,
                    duration: Duration::from_secs(20),
                },
                StageLimit::duration(Duration::from_secs(20)),
            ),
            stage(
                Arrival::GuidellmPoisson { rate: 5.0 },
                StageLimit::duration(Duration::from_secs(20)),
            ),
            stage(
                Arrival::VllmGamma {
                    rate: Rate::PerSecond(5.0),
                    burstiness: 0.5,
                    count: 100,
                },
                StageLimit::requests(100),
            ),
        ];
        for st in &stages {
            assert_eq!(schedule(st, 11), schedule(st, 11), "{:?}", st.arrival);
            assert_ne!(schedule(st, 11), schedule(st, 12), "{:?}", st.arrival);
        }
    }

    #[test]
    fn inference_perf_poisson_sends_int_rate_times_duration_in_one_second_slots() {
        let duration = Duration::from_secs(200);
        let st = stage(
            Arrival::InferencePerfPoisson {
                rate: 4.0,
                duration,
            },
            StageLimit::duration(duration),
        );
        let s = schedule(&st, 5);
        let t = times(&s);
        assert_eq!(t.len(), 800);
        assert!(is_sorted(t));
        // Each non-empty slot ends with an arrival exactly on the slot boundary.
        let on_boundary = t.iter().filter(|d| d.as_secs_f64().fract() < 1e-9).count();
        assert!(
            on_boundary > 150,
            "{on_boundary} arrivals on a whole second"
        );
        // Mean rate within a loose bound of the target.
        let span = t.last().unwrap().as_secs_f64();
        let achieved = t.len() as f64 / span;
        assert!((3.4..4.6).contains(&achieved), "achieved {achieved}/s");
    }

    #[test]
    fn inference_perf_poisson_skips_empty_slots() {
        // At 0.2/s most slots are empty; 20 arrivals then need about 100 s, not 20.
        let duration = Duration::from_secs(100);
        let st = stage(
            Arrival::InferencePerfPoisson {
                rate: 0.2,
                duration,
            },
            StageLimit::duration(duration),
        );
        let s = schedule(&st, 9);
        let t = times(&s);
        assert_eq!(t.len(), 20);
        assert!(t.last().unwrap().as_secs_f64() > 40.0, "{:?}", t.last());
    }

    #[test]
    fn guidellm_constant_sends_at_exact_multiples_of_one_over_rate() {
        let st = stage(
            Arrival::GuidellmConstant {
                rate: 4.0,
                rampup: Duration::ZERO,
            },
            StageLimit::duration(Duration::from_secs(30)),
        );
        let s = schedule(&st, 0);
        let t = times(&s);
        // i/rate for i = 1.. while before the 30 s limit: 1/4 … 119/4.
        assert_eq!(t.len(), 119);
        for (i, d) in t.iter().enumerate() {
            assert_eq!(*d, Duration::from_secs_f64((i + 1) as f64 / 4.0));
        }
        // Seeds do not matter for a deterministic process.
        assert_eq!(schedule(&st, 0), schedule(&st, 99));
    }

    #[test]
    fn guidellm_constant_stops_at_the_request_limit_first() {
        let st = stage(
            Arrival::GuidellmConstant {
                rate: 10.0,
                rampup: Duration::ZERO,
            },
            StageLimit {
                duration: Some(Duration::from_secs(100)),
                requests: Some(25),
                ..StageLimit::default()
            },
        );
        assert_eq!(times(&schedule(&st, 0)).len(), 25);
    }

    #[test]
    fn guidellm_constant_rampup_follows_the_quadratic_then_the_rate() {
        let st = stage(
            Arrival::GuidellmConstant {
                rate: 10.0,
                rampup: Duration::from_secs(4),
            },
            StageLimit::requests(40),
        );
        let s = schedule(&st, 0);
        let t = times(&s);
        // n = rate·t²/(2·rampup): the 20th request ends the 4-s ramp.
        assert!((t[19].as_secs_f64() - 4.0).abs() < 1e-9);
        assert!((t[0].as_secs_f64() - (0.8f64).sqrt()).abs() < 1e-9);
        // After the ramp, 1/rate apart.
        assert!((t[39].as_secs_f64() - 6.0).abs() < 1e-9);
        assert!(is_sorted(t));
    }

    #[test]
    fn guidellm_poisson_mean_rate_is_close_to_the_target() {
        let st = stage(
            Arrival::GuidellmPoisson { rate: 20.0 },
            StageLimit::duration(Duration::from_secs(100)),
        );
        let s = schedule(&st, 42);
        let t = times(&s);
        assert!(is_sorted(t));
        assert!(t.last().unwrap() < &Duration::from_secs(100));
        let n = t.len() as f64;
        assert!(
            (1800.0..2200.0).contains(&n),
            "{n} arrivals in 100 s at 20/s"
        );
    }

    #[test]
    fn vllm_gamma_last_arrival_is_exactly_n_over_rate() {
        for (burstiness, rate, n) in [
            (1.0, 8.0, 2000),
            (0.25, 20.0, 500),
            (4.0, 3.0, 7),
            (f64::INFINITY, 2.0, 10),
        ] {
            let st = stage(
                Arrival::VllmGamma {
                    rate: Rate::PerSecond(rate),
                    burstiness,
                    count: n,
                },
                StageLimit::requests(n),
            );
            let s = schedule(&st, 0);
            let t = times(&s);
            assert_eq!(t.len() as u64, n);
            assert!(is_sorted(t));
            assert_eq!(
                *t.last().unwrap(),
                Duration::from_secs_f64(n as f64 / rate),
                "burstiness {burstiness}"
            );
        }
    }

    #[test]
    fn vllm_infinite_rate_sends_everything_at_zero_under_the_concurrency_cap() {
        let mut st = stage(
            Arrival::VllmGamma {
                rate: Rate::Infinite,
                burstiness: 1.0,
                count: 32,
            },
            StageLimit::requests(32),
        );
        st.max_concurrency = Some(1);
        match schedule(&st, 3) {
            Schedule::Open {
                send_at,
                max_in_flight,
            } => {
                assert_eq!(send_at, vec![Duration::ZERO; 32]);
                assert_eq!(max_in_flight, Some(1));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn vllm_ramp_up_sends_each_request_one_gap_of_its_own_rate_after_the_last() {
        use crate::workload::model::RampUpStrategy;
        let ramp = |strategy, start_rps, end_rps, count| {
            let st = stage(
                Arrival::VllmGamma {
                    rate: Rate::RampUp(RampUp {
                        strategy,
                        start_rps,
                        end_rps,
                    }),
                    burstiness: f64::INFINITY,
                    count,
                },
                StageLimit::requests(count),
            );
            times(&schedule(&st, 0)).to_vec()
        };
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        // Linear 1 → 4 rps over 4 requests: rates 1, 2, 3, 4; gaps 1, 1/2, 1/3, 1/4 s, the first one included and
        // none rescaled (a ramp is not normalised to count/rate).
        let linear = ramp(RampUpStrategy::Linear, 1, 4, 4);
        let expected = [1.0, 1.5, 1.5 + 1.0 / 3.0, 1.5 + 1.0 / 3.0 + 0.25];
        assert_eq!(linear.len(), 4);
        for (t, e) in linear.iter().zip(expected) {
            assert!((t.as_secs_f64() - e).abs() < 1e-9, "{linear:?}");
        }
        // Exponential 1 → 4 rps over 3 requests: rates 1, 2, 4; gaps 1, 0.5, 0.25 s.
        assert_eq!(
            ramp(RampUpStrategy::Exponential, 1, 4, 3),
            ms(&[1000, 1500, 1750])
        );
        // Gamma gaps at each request's rate: still sorted, one per request.
        let st = stage(
            Arrival::VllmGamma {
                rate: Rate::RampUp(RampUp {
                    strategy: RampUpStrategy::Linear,
                    start_rps: 1,
                    end_rps: 50,
                }),
                burstiness: 1.0,
                count: 100,
            },
            StageLimit::requests(100),
        );
        let s = schedule(&st, 7);
        let t = times(&s);
        assert_eq!(t.len(), 100);
        assert!(is_sorted(t) && t[0] > Duration::ZERO);
    }

    #[test]
    fn vllm_gamma_burstiness_below_one_is_burstier_than_poisson() {
        let cv = |burstiness: f64| {
            let st = stage(
                Arrival::VllmGamma {
                    rate: Rate::PerSecond(10.0),
                    burstiness,
                    count: 5000,
                },
                StageLimit::requests(5000),
            );
            let s = schedule(&st, 1);
            let gaps: Vec<f64> = times(&s)
                .windows(2)
                .map(|w| (w[1] - w[0]).as_secs_f64())
                .collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            var.sqrt() / mean
        };
        // Coefficient of variation of gamma gaps = 1/sqrt(shape).
        let (bursty, poisson, smooth) = (cv(0.25), cv(1.0), cv(16.0));
        assert!((1.7..2.3).contains(&bursty), "{bursty}");
        assert!((0.9..1.1).contains(&poisson), "{poisson}");
        assert!((0.2..0.3).contains(&smooth), "{smooth}");
    }

    #[test]
    fn closed_loop_stages_keep_n_in_flight_with_their_limits() {
        let st = Stage {
            load: LoadKind::Concurrent,
            arrival: Arrival::Closed {
                concurrency: 8,
                rampup: Duration::ZERO,
            },
            limit: StageLimit::requests(256),
            max_concurrency: None,
            warmup: None,
            cooldown: None,
        };
        assert_eq!(
            schedule(&st, 0),
            Schedule::Closed {
                concurrency: 8,
                total: Some(256),
                duration: None,
                rampup: Duration::ZERO
            }
        );
    }

    #[test]
    fn an_aiperf_stage_paces_with_its_pace_and_slots() {
        let s = schedule(
            &stage(
                Arrival::AiperfRate {
                    pace: AiperfPace::Constant { rate: 4.0 },
                    concurrency: Some(3),
                    grace: Some(Duration::from_secs(30)),
                    warmup_requests: 2,
                    sessions: None,
                    credits: AiperfCredits::default(),
                },
                StageLimit::duration(Duration::from_millis(1100)),
            ),
            1,
        );
        assert_eq!(
            s,
            Schedule::Paced {
                pace: AiperfPace::Constant { rate: 4.0 },
                max_in_flight: Some(3),
                total: None,
                duration: Some(Duration::from_millis(1100)),
                grace: Some(Duration::from_secs(30)),
                warmup: 2,
                sessions: None,
                credits: AiperfCredits::default(),
            }
        );
    }

    // A real AIPerf 0.13 run (`--random-seed 42 --request-rate 10`, poisson) against `llmbench sim` sent its first
    // requests 73.6, then 35.6 and 48.0 ms apart; a warm-up phase drew the same intervals from the start again.
    // CPython: r = random.Random(int.from_bytes(sha256(b"42:timing.request.poisson_interval").digest()[:8],
    //   "big")); [r.expovariate(10) for _ in range(3)] -> [0.07315861132188832, 0.035776074871606764, 0.04687624121285631]
    #[test]
    fn aiperf_intervals_are_0_13s_derived_poisson_draws_afresh_for_each_phase() {
        let pace = AiperfPace::Poisson {
            rate: 10.0,
            seed: 42,
        };
        let want = [
            0.07315861132188832,
            0.035776074871606764,
            0.04687624121285631,
        ];
        for _phase in 0..2 {
            let got: Vec<f64> = pace.intervals().take(3).map(|d| d.as_secs_f64()).collect();
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() < 1e-9, "{got:?}");
            }
        }
        let constant: Vec<Duration> = AiperfPace::Constant { rate: 4.0 }
            .intervals()
            .take(2)
            .collect();
        assert_eq!(constant, [Duration::from_millis(250); 2]);
        assert_eq!(AiperfPace::Burst.intervals().next(), Some(Duration::ZERO));
    }

    // `--request-rate 10 --arrival-pattern gamma --arrival-smoothness 0.5 --random-seed 42`: CPython's
    // r = random.Random(int.from_bytes(sha256(b"42:timing.request.gamma_interval").digest()[:8], "big"));
    // [r.gammavariate(0.5, 1 / (10 * 0.5)) for _ in range(3)] -> [0.1776039623429959, 0.026664615297712902,
    // 0.005811092887293051]; without a smoothness AIPerf's generator uses 1.0 -> [0.08820878513887578, …].
    #[test]
    fn aiperf_gamma_intervals_are_0_13s_derived_gamma_draws_afresh_for_each_phase() {
        let pace = AiperfPace::Gamma {
            rate: 10.0,
            smoothness: 0.5,
            seed: 42,
        };
        let want = [
            0.1776039623429959,
            0.026664615297712902,
            0.005811092887293051,
        ];
        for _phase in 0..2 {
            let got: Vec<f64> = pace.intervals().take(3).map(|d| d.as_secs_f64()).collect();
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() < 1e-9, "{got:?}");
            }
        }
        let exponential = AiperfPace::Gamma {
            rate: 10.0,
            smoothness: 1.0,
            seed: 42,
        };
        let first = exponential.intervals().next().map(|d| d.as_secs_f64());
        assert!(
            first.is_some_and(|g| (g - 0.08820878513887578).abs() < 1e-9),
            "{first:?}"
        );
        assert_eq!(exponential.mean_interval(), Duration::from_millis(100));
    }

    #[test]
    fn stage_seeds_differ_per_stage_and_repeat_per_seed() {
        assert_eq!(stage_seed(42, 3), stage_seed(42, 3));
        assert_ne!(stage_seed(42, 0), stage_seed(42, 1));
        assert_ne!(stage_seed(42, 0), stage_seed(43, 0));
    }
}
