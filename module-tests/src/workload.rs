//! Reproducible workloads: the seeded [`Rng`] and the soak switch [`long_run`].

/// True when `TALLY_LONG` is set to something other than empty or `0`: the soak variant
/// (`make test-long`), where tests run more rounds, keys and seeds.
pub fn long_run() -> bool {
    std::env::var("TALLY_LONG").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// splitmix64: a tiny seeded PRNG for reproducible workloads (no rand crate).
/// The same seed always gives the same sequence, so a failing seed can be
/// replayed.
///
/// ```ignore
/// let mut rng = Rng(7);
/// let member = format!("m{}", rng.below(30)); // 0..30
/// ```
pub struct Rng(pub u64);

impl Rng {
    /// The next raw 64-bit value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n <= 0` counts as 1, giving 0).
    pub fn below(&mut self, n: i64) -> i64 {
        (self.next_u64() % n.max(1) as u64) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: i64) -> bool {
        self.below(100) < percent
    }

    /// A uniformly chosen element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as i64) as usize]
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal via Box-Muller.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1], safe for ln
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Log-normal, exp(3 + N(0, 1)): positive, skewed, spanning several decades.
    pub fn lognormal(&mut self) -> f64 {
        (3.0 + self.normal()).exp()
    }
}
