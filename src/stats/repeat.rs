//! One statistic across repeated runs (`--runs N`): the value each run measured, their mean,
//! standard deviation, coefficient of variation, and the 95 % confidence interval of the mean.
//!
//! A run's value is a statistic of its own (its TTFT p99, its output tok/s); the N values are
//! N draws of it, and run-to-run variation (a server's state, the machine's neighbours, clocks)
//! is what they show and one run cannot. The interval is Student's: mean ± t · sd / √n with t
//! the 0.975 quantile of Student's t with n − 1 degrees of freedom, which assumes the runs'
//! values are independent and roughly normal (with 3 runs it is wide on purpose).
//!
//! The t quantiles are a table for 1 to 30 degrees of freedom, computed to 17 significant
//! digits from the regularized incomplete beta function (mpmath at 30 digits; they agree with
//! `scipy.stats.t.ppf(0.975, df)` to 1e-10), and beyond 30 the Cornish–Fisher expansion of t in
//! 1/df around the normal quantile (four terms: within 3.1e-8 of the exact value at 30, 1e-9 at
//! 60), which tends to the normal quantile 1.959964 as df grows.

use serde::Serialize;

/// The confidence of the interval.
pub const CONFIDENCE: f64 = 0.95;

/// Student's t, 0.975 quantile, for 1 to 30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706204736174705,
    4.302652729749464,
    3.1824463052837095,
    2.7764451051977943,
    2.5705818356363155,
    2.44691185114497,
    2.3646242515927853,
    2.3060041352041667,
    2.2621571627982053,
    2.228138851986275,
    2.20098516009164,
    2.178812829667229,
    2.1603686564627926,
    2.144786687917804,
    2.1314495455597755,
    2.1199052992212546,
    2.109815577833317,
    2.1009220402410387,
    2.09302405440831,
    2.085963447265865,
    2.0796138447276804,
    2.073873067904026,
    2.0686576104190486,
    2.063898561628026,
    2.0595385527532977,
    2.055529438642873,
    2.0518305164802855,
    2.048407141795245,
    2.0452296421327043,
    2.042272456301238,
];

/// The standard normal's 0.975 quantile: Student's t with infinite degrees of freedom.
pub const Z_975: f64 = 1.959963984540054;

/// Student's t 0.975 quantile with `df` degrees of freedom (the two-sided 95 % interval's);
/// `None` for 0.
pub fn t_975(df: u64) -> Option<f64> {
    match df {
        0 => None,
        1..=30 => T_975.get(df as usize - 1).copied(),
        _ => {
            // Cornish–Fisher: t = z + g1/ν + g2/ν² + g3/ν³ + g4/ν⁴.
            let z = Z_975;
            let v = df as f64;
            let z3 = z.powi(3);
            let z5 = z.powi(5);
            let z7 = z.powi(7);
            let z9 = z.powi(9);
            let g1 = (z3 + z) / 4.0;
            let g2 = (5.0 * z5 + 16.0 * z3 + 3.0 * z) / 96.0;
            let g3 = (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / 384.0;
            let g4 = (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z) / 92160.0;
            Some(z + g1 / v + g2 / v.powi(2) + g3 / v.powi(3) + g4 / v.powi(4))
        }
    }
}

/// A statistic's spread over the runs that have it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Runs with a value.
    pub n: usize,
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1); `None` below 2 runs.
    pub sd: Option<f64>,
    /// sd / |mean|; `None` below 2 runs or at a mean of 0.
    pub cv: Option<f64>,
    /// The 95 % confidence interval of the mean; `None` below 2 runs.
    pub ci_lo: Option<f64>,
    pub ci_hi: Option<f64>,
    /// The t quantile the interval used (n − 1 degrees of freedom).
    pub t: Option<f64>,
}

impl Spread {
    /// The spread of `values`, one per run (those that are not finite are left out).
    pub fn of(values: &[f64]) -> Spread {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let n = v.len();
        if n == 0 {
            return Spread::default();
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Spread {
                n,
                mean: Some(mean),
                ..Spread::default()
            };
        }
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let t = t_975(n as u64 - 1);
        let half = t.map(|t| t * sd / (n as f64).sqrt());
        Spread {
            n,
            mean: Some(mean),
            sd: Some(sd),
            cv: (mean != 0.0).then(|| sd / mean.abs()),
            ci_lo: half.map(|h| mean - h),
            ci_hi: half.map(|h| mean + h),
            t,
        }
    }

    /// Half the interval's width (t · sd / √n).
    pub fn half_width(&self) -> Option<f64> {
        Some((self.ci_hi? - self.ci_lo?) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    /// Against values computed apart (mpmath's incomplete beta at 30 digits; df 2 as scipy
    /// gives it, 2e-11 off) to 1e-7, and the normal's limit.
    #[test]
    fn t_quantiles_match_known_values() {
        for (df, want) in [
            (1, 12.706204736174705),
            (2, 4.302652729911275),
            (3, 3.1824463052837095),
            (4, 2.7764451051977943),
            (9, 2.2621571627982053),
            (10, 2.228138851986275),
            (29, 2.0452296421327043),
            (30, 2.042272456301238),
            (31, 2.0395134463964086),
            (40, 2.0210753903062733),
            (60, 2.0002978220142604),
            (120, 1.979930405082441),
            (1000, 1.9623390808264085),
        ] {
            let t = t_975(df).unwrap();
            assert!(close(t, want, 1e-7), "df {df}: {t} vs {want}");
        }
        assert_eq!(t_975(0), None);
        assert!(close(t_975(1_000_000_000).unwrap(), Z_975, 1e-8));
        // Never below the normal quantile, and falling with df.
        let mut last = f64::INFINITY;
        for df in 1..200 {
            let t = t_975(df).unwrap();
            assert!(t < last && t > Z_975, "df {df}: {t}");
            last = t;
        }
    }

    #[test]
    fn the_interval_is_t_sd_over_root_n_around_the_mean() {
        // mean 2, sd 1 (n − 1), three runs: half width 4.3027 / √3.
        let s = Spread::of(&[1.0, 2.0, 3.0]);
        assert_eq!(s.n, 3);
        assert_eq!(s.mean, Some(2.0));
        assert!(close(s.sd.unwrap(), 1.0, 1e-12));
        assert!(close(s.cv.unwrap(), 0.5, 1e-12));
        let half = 4.302652729911275 / 3f64.sqrt();
        assert!(close(s.half_width().unwrap(), half, 1e-9), "{s:?}");
        assert!(close(s.ci_lo.unwrap(), 2.0 - half, 1e-9));
        assert!(close(s.ci_hi.unwrap(), 2.0 + half, 1e-9));
        // Ten runs of sd 1: narrower by t(9)/t(2) and √3/√10.
        let ten: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 1.0 } else { 3.0 })
            .collect();
        let s10 = Spread::of(&ten);
        let sd10 = (10.0f64 / 9.0).sqrt();
        assert!(close(s10.sd.unwrap(), sd10, 1e-12));
        assert!(close(
            s10.half_width().unwrap(),
            2.2621571627982053 * sd10 / 10f64.sqrt(),
            1e-12
        ));
        // Identical runs: a point.
        let same = Spread::of(&[5.0; 4]);
        assert_eq!((same.sd, same.half_width()), (Some(0.0), Some(0.0)));
    }

    #[test]
    fn one_run_has_a_mean_and_no_spread_and_none_has_nothing() {
        let one = Spread::of(&[4.0, f64::NAN]);
        assert_eq!(
            (one.n, one.mean, one.sd, one.ci_lo),
            (1, Some(4.0), None, None)
        );
        assert_eq!(Spread::of(&[]), Spread::default());
        // A mean of 0 has no coefficient of variation.
        assert_eq!(Spread::of(&[-1.0, 1.0]).cv, None);
    }
}
