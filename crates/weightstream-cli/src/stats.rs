//! Timing repeated runs: median and spread.

use std::time::Instant;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Timing {
    /// Seconds per run, sorted.
    pub runs: Vec<f64>,
}

impl Timing {
    /// Two workloads measured alternately, run by run, so that both see the
    /// same moments of a noisy machine and their ratio is fair.
    pub fn measure_pair(warmup: usize, reps: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (Timing, Timing) {
        let [ta, tb] = Timing::measure_interleaved(warmup, reps, [&mut a, &mut b]);
        (ta, tb)
    }

    /// `N` workloads measured in turn, run by run (`bench --dtype f16`:
    /// float16, BF16 and memcpy in the same rounds).
    pub fn measure_interleaved<const N: usize>(warmup: usize, reps: usize, mut fs: [&mut dyn FnMut(); N]) -> [Timing; N] {
        for _ in 0..warmup {
            for f in fs.iter_mut() {
                f();
            }
        }
        let mut runs: [Vec<f64>; N] = std::array::from_fn(|_| Vec::with_capacity(reps));
        for _ in 0..reps.max(1) {
            for (f, r) in fs.iter_mut().zip(runs.iter_mut()) {
                let t = Instant::now();
                f();
                r.push(t.elapsed().as_secs_f64());
            }
        }
        runs.map(|mut r| {
            r.sort_by(f64::total_cmp);
            Timing { runs: r }
        })
    }

    pub fn median(&self) -> f64 {
        let n = self.runs.len();
        if n % 2 == 1 {
            self.runs[n / 2]
        } else {
            (self.runs[n / 2 - 1] + self.runs[n / 2]) / 2.0
        }
    }

    /// Throughput in GB/s (10^9 bytes) for `bytes` per run: (median, fastest, slowest).
    pub fn gbps(&self, bytes: u64) -> (f64, f64, f64) {
        let g = |s: f64| bytes as f64 / s / 1e9;
        (g(self.median()), g(self.runs[0]), g(*self.runs.last().unwrap()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_sorted_runs() {
        let t = Timing { runs: vec![1.0, 2.0, 4.0] };
        assert_eq!(t.median(), 2.0);
        assert_eq!(t.gbps(4_000_000_000), (2.0, 4.0, 1.0));
        let t = Timing { runs: vec![1.0, 3.0] };
        assert_eq!(t.median(), 2.0);
    }
}
