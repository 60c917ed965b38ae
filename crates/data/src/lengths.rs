//! Token-length distributions as the upstream tools sample them: a draw is clipped to `[min, max]` and rounded
//! (inference-perf `generate_distribution`), and vLLM's `--random-range-ratio` is a uniform integer range.

use rand::{Rng, RngExt as _};
use rand_distr::{Distribution, LogNormal, Normal, Poisson, SkewNormal};

use super::DataError;

/// A distribution of token counts.
#[derive(Debug, Clone, PartialEq)]
pub enum LengthDistribution {
    Fixed(u32),
    /// Uniform integers in `[min, max]`.
    Uniform {
        min: u32,
        max: u32,
    },
    Normal {
        mean: f64,
        std_dev: f64,
        min: u32,
        max: u32,
    },
    /// scipy's `skewnorm(a = skew, loc = mean, scale = std_dev)`, as inference-perf draws it.
    SkewNormal {
        mean: f64,
        std_dev: f64,
        skew: f64,
        min: u32,
        max: u32,
    },
    /// A lognormal whose own mean and standard deviation are `mean` and `std_dev`.
    Lognormal {
        mean: f64,
        std_dev: f64,
        min: u32,
        max: u32,
    },
    Poisson {
        mean: f64,
        min: u32,
        max: u32,
    },
    /// AIPerf's `sample_positive_normal_integer`: `ceil` of the first normal draw that is at least 0.
    PositiveNormal {
        mean: f64,
        std_dev: f64,
    },
}

impl LengthDistribution {
    /// vLLM `--random-*-len len --random-range-ratio ratio`: uniform integers in
    /// `[floor(len·(1−ratio)), ceil(len·(1+ratio))]`, `ratio` in `[0, 1)`.
    pub fn vllm_range(len: u32, ratio: f64) -> Result<Self, DataError> {
        if !(0.0..1.0).contains(&ratio) {
            return Err(DataError::RangeRatio { ratio });
        }
        let len = f64::from(len);
        let min = (len * (1.0 - ratio)).floor();
        let max = (len * (1.0 + ratio)).ceil().min(f64::from(u32::MAX));
        Ok(LengthDistribution::Uniform {
            min: min as u32,
            max: max as u32,
        })
    }

    /// A sampler for this distribution, or why its parameters are unusable (`what` names it in the error).
    pub fn sampler(&self, what: &str) -> Result<LengthSampler, DataError> {
        let invalid = |reason: String| DataError::InvalidDistribution {
            what: what.to_owned(),
            reason,
        };
        let bounds = |min: u32, max: u32| {
            if min > max {
                Err(invalid(format!("min {min} is above max {max}")))
            } else {
                Ok((min, max))
            }
        };
        let finite = |name: &str, v: f64| {
            if v.is_finite() {
                Ok(v)
            } else {
                Err(invalid(format!(
                    "{name} must be a finite number, found {v}"
                )))
            }
        };
        let spread = |v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(invalid(format!(
                    "std_dev must be a finite number ≥ 0, found {v}"
                )))
            }
        };
        let kind = match *self {
            LengthDistribution::Fixed(n) => Kind::Fixed(n),
            LengthDistribution::Uniform { min, max } => {
                let (min, max) = bounds(min, max)?;
                Kind::Uniform(min, max)
            }
            LengthDistribution::Normal {
                mean,
                std_dev,
                min,
                max,
            } => {
                let normal = Normal::new(finite("mean", mean)?, spread(std_dev)?)
                    .map_err(|e| invalid(format!("normal(mean {mean}, std_dev {std_dev}): {e}")))?;
                Kind::Normal(normal, bounds(min, max)?)
            }
            LengthDistribution::SkewNormal {
                mean,
                std_dev,
                skew,
                min,
                max,
            } => {
                let dist = SkewNormal::new(
                    finite("mean", mean)?,
                    spread(std_dev)?,
                    finite("skew", skew)?,
                )
                .map_err(|e| {
                    invalid(format!(
                        "skew normal(mean {mean}, std_dev {std_dev}, skew {skew}): {e}"
                    ))
                })?;
                Kind::SkewNormal(dist, bounds(min, max)?)
            }
            LengthDistribution::Lognormal {
                mean,
                std_dev,
                min,
                max,
            } => {
                if finite("mean", mean)? <= 0.0 {
                    return Err(invalid(format!(
                        "a lognormal needs a positive mean, found {mean}"
                    )));
                }
                let dist = LogNormal::from_mean_cv(mean, spread(std_dev)? / mean).map_err(|e| {
                    invalid(format!("lognormal(mean {mean}, std_dev {std_dev}): {e}"))
                })?;
                Kind::Lognormal(dist, bounds(min, max)?)
            }
            LengthDistribution::Poisson { mean, min, max } => {
                let dist = Poisson::new(finite("mean", mean)?)
                    .map_err(|e| invalid(format!("poisson(mean {mean}): {e}")))?;
                Kind::Poisson(dist, bounds(min, max)?)
            }
            LengthDistribution::PositiveNormal { mean, std_dev } => {
                // AIPerf refuses a negative mean (`sample_positive_normal`); with one, redrawing could not end.
                if !(mean.is_finite() && mean >= 0.0) {
                    return Err(invalid(format!(
                        "mean must be a finite number ≥ 0, found {mean}"
                    )));
                }
                let normal = Normal::new(mean, spread(std_dev)?)
                    .map_err(|e| invalid(format!("normal(mean {mean}, std_dev {std_dev}): {e}")))?;
                Kind::PositiveNormal(normal)
            }
        };
        Ok(LengthSampler { kind })
    }
}

/// Draws token counts from a validated [`LengthDistribution`].
#[derive(Debug, Clone)]
pub struct LengthSampler {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Fixed(u32),
    Uniform(u32, u32),
    Normal(Normal<f64>, (u32, u32)),
    SkewNormal(SkewNormal<f64>, (u32, u32)),
    Lognormal(LogNormal<f64>, (u32, u32)),
    Poisson(Poisson<f64>, (u32, u32)),
    PositiveNormal(Normal<f64>),
}

impl LengthSampler {
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let clip = |x: f64, (min, max): (u32, u32)| -> u32 {
            // NaN cannot come out of these distributions with finite parameters; map it to min regardless.
            if x.is_nan() {
                min
            } else {
                x.clamp(f64::from(min), f64::from(max)).round() as u32
            }
        };
        match &self.kind {
            Kind::Fixed(n) => *n,
            Kind::Uniform(min, max) => rng.random_range(*min..=*max),
            Kind::Normal(d, b) => clip(d.sample(rng), *b),
            Kind::SkewNormal(d, b) => clip(d.sample(rng), *b),
            Kind::Lognormal(d, b) => clip(d.sample(rng), *b),
            Kind::Poisson(d, b) => clip(d.sample(rng), *b),
            // `sample_normal(mean, stddev, lower=0)` redraws below 0; `math.ceil` rounds up.
            Kind::PositiveNormal(d) => loop {
                let x = d.sample(rng);
                if x >= 0.0 {
                    break x.ceil().min(f64::from(u32::MAX)) as u32;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;
    use rand::rngs::Xoshiro256PlusPlus;

    use super::*;

    fn draws(dist: &LengthDistribution, n: usize, seed: u64) -> Vec<u32> {
        let sampler = dist.sampler("test").expect("valid");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n).map(|_| sampler.sample(&mut rng)).collect()
    }

    fn mean(v: &[u32]) -> f64 {
        v.iter().copied().map(f64::from).sum::<f64>() / v.len() as f64
    }

    #[test]
    fn vllm_range_ratio_spans_len_times_one_plus_minus_ratio() {
        assert_eq!(
            LengthDistribution::vllm_range(1000, 0.1).expect("valid"),
            LengthDistribution::Uniform {
                min: 900,
                max: 1100
            }
        );
        assert_eq!(
            LengthDistribution::vllm_range(15, 0.5).expect("valid"),
            LengthDistribution::Uniform { min: 7, max: 23 }
        );
        assert_eq!(
            LengthDistribution::vllm_range(128, 0.0).expect("valid"),
            LengthDistribution::Uniform { min: 128, max: 128 }
        );
        assert!(matches!(
            LengthDistribution::vllm_range(128, 1.0),
            Err(DataError::RangeRatio { .. })
        ));
        assert!(matches!(
            LengthDistribution::vllm_range(128, -0.1),
            Err(DataError::RangeRatio { .. })
        ));
    }

    #[test]
    fn draws_are_clipped_to_bounds_and_reproducible_by_seed() {
        let dists = [
            LengthDistribution::Uniform { min: 10, max: 20 },
            LengthDistribution::Normal {
                mean: 100.0,
                std_dev: 50.0,
                min: 60,
                max: 130,
            },
            LengthDistribution::SkewNormal {
                mean: 100.0,
                std_dev: 50.0,
                skew: 4.0,
                min: 60,
                max: 200,
            },
            LengthDistribution::Lognormal {
                mean: 100.0,
                std_dev: 80.0,
                min: 10,
                max: 300,
            },
            LengthDistribution::Poisson {
                mean: 40.0,
                min: 30,
                max: 50,
            },
        ];
        for dist in &dists {
            let (min, max) = match *dist {
                LengthDistribution::Uniform { min, max }
                | LengthDistribution::Normal { min, max, .. }
                | LengthDistribution::SkewNormal { min, max, .. }
                | LengthDistribution::Lognormal { min, max, .. }
                | LengthDistribution::Poisson { min, max, .. } => (min, max),
                LengthDistribution::Fixed(n) => (n, n),
                LengthDistribution::PositiveNormal { .. } => (0, u32::MAX),
            };
            let a = draws(dist, 2000, 7);
            assert!(a.iter().all(|&x| (min..=max).contains(&x)), "{dist:?}");
            assert_eq!(a, draws(dist, 2000, 7), "{dist:?}: same seed, same draws");
            assert_ne!(
                a,
                draws(dist, 2000, 8),
                "{dist:?}: another seed, other draws"
            );
        }
    }

    #[test]
    fn draw_means_follow_the_parameters() {
        let normal = draws(
            &LengthDistribution::Normal {
                mean: 500.0,
                std_dev: 20.0,
                min: 0,
                max: 10_000,
            },
            20_000,
            1,
        );
        assert!((mean(&normal) - 500.0).abs() < 2.0, "{}", mean(&normal));
        let lognormal = draws(
            &LengthDistribution::Lognormal {
                mean: 300.0,
                std_dev: 100.0,
                min: 0,
                max: 100_000,
            },
            20_000,
            1,
        );
        assert!(
            (mean(&lognormal) - 300.0).abs() < 5.0,
            "{}",
            mean(&lognormal)
        );
        let skewed = draws(
            &LengthDistribution::SkewNormal {
                mean: 300.0,
                std_dev: 100.0,
                skew: 5.0,
                min: 0,
                max: 100_000,
            },
            20_000,
            1,
        );
        // A right skew moves the mean above the location: loc + scale·δ·√(2/π), δ = a/√(1+a²).
        let expected = 300.0 + 100.0 * (5.0 / 26f64.sqrt()) * (2.0 / std::f64::consts::PI).sqrt();
        assert!(
            (mean(&skewed) - expected).abs() < 3.0,
            "{} vs {expected}",
            mean(&skewed)
        );
        let poisson = draws(
            &LengthDistribution::Poisson {
                mean: 50.0,
                min: 0,
                max: 1000,
            },
            20_000,
            1,
        );
        assert!((mean(&poisson) - 50.0).abs() < 0.5, "{}", mean(&poisson));
    }

    #[test]
    fn unusable_parameters_are_rejected_with_the_field_named() {
        let err = LengthDistribution::Uniform { min: 5, max: 4 }
            .sampler("input length")
            .unwrap_err();
        assert!(
            err.to_string().contains("input length") && err.to_string().contains("min 5"),
            "{err}"
        );
        assert!(
            LengthDistribution::Normal {
                mean: 1.0,
                std_dev: -1.0,
                min: 0,
                max: 1
            }
            .sampler("x")
            .is_err()
        );
        assert!(
            LengthDistribution::Lognormal {
                mean: 0.0,
                std_dev: 1.0,
                min: 0,
                max: 1
            }
            .sampler("x")
            .is_err()
        );
        assert!(
            LengthDistribution::Poisson {
                mean: f64::NAN,
                min: 0,
                max: 1
            }
            .sampler("x")
            .is_err()
        );
    }

    #[test]
    fn aiperfs_positive_normal_redraws_below_zero_and_rounds_up() {
        // Stddev 0: the mean itself, rounded up.
        let fixed = LengthDistribution::PositiveNormal {
            mean: 99.2,
            std_dev: 0.0,
        };
        assert!(draws(&fixed, 50, 1).iter().all(|&x| x == 100));
        // N(1, 10) redrawn below 0 is the upper part of the normal: E[X | X ≥ 0] = 1 + 10·φ(0.1)/Φ(0.1)
        // = 1 + 10 · 0.396953 / 0.539828 = 8.353, and rounding up adds about 0.5: ≈ 8.85. Clamping at 0 instead
        // (the other normals here) would give E[max(X, 0)] ≈ 4.5.
        let wide = LengthDistribution::PositiveNormal {
            mean: 1.0,
            std_dev: 10.0,
        };
        let a = draws(&wide, 20_000, 3);
        assert!(
            a.iter().all(|&x| x >= 1),
            "a draw of exactly 0.0 aside, every length is at least 1"
        );
        let m = mean(&a);
        assert!((8.6..9.1).contains(&m), "mean {m}");
        assert!(
            LengthDistribution::PositiveNormal {
                mean: -1.0,
                std_dev: 1.0
            }
            .sampler("isl")
            .is_err()
        );
    }
}
