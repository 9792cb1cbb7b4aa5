//! Llama 3.1+'s `llama3` rope scaling: convert_hf_to_gguf.py writes no
//! scaling keys for it but a tensor, `rope_freqs.weight` (F32, one factor
//! per rotary frequency), that it computes in `LlamaModel.
//! generate_extra_tensors` with torch float32 operations. The same
//! operations here, each rounded to f32 as torch rounds it (checked
//! against torch: `2π / freq` is a reciprocal then a product, a division
//! by a Python float a true division). torch's `base ** e` is its
//! vectorized pow (Sleef, 1 ulp): here `base^e` rounded once from f64,
//! which differs from it by at most 1 ulp for some exponents (6 of 1408
//! frequencies of common bases and head sizes differ; scripts/test_c.sh
//! checks a Llama-3-shaped case against convert_hf_to_gguf.py itself).

use serde_json::Value as Json;

use crate::config::{f32_value, find, CONFIG};
use crate::error::{format_err, Result};

/// The `llama3` rope parameters (convert's defaults where absent).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Llama3Rope {
    pub base: f64,
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_context: f64,
}

fn number(r: Option<&Json>, key: &'static str, default: f64) -> Result<f64> {
    match find(r, &[key]) {
        None => Ok(default),
        Some((_, v)) => {
            let x = v.as_f64().ok_or_else(|| format_err(CONFIG, &format!("rope_scaling.{key}"), format!("{v} is not a number")))?;
            if x.is_finite() && x > 0.0 {
                Ok(x)
            } else {
                Err(format_err(CONFIG, &format!("rope_scaling.{key}"), format!("{v} is not a positive number")))
            }
        }
    }
}

impl Llama3Rope {
    /// From the rope parameters `r` and the model's rope theta `theta`.
    pub(crate) fn parse(r: Option<&Json>, theta: Option<&Json>) -> Result<Llama3Rope> {
        let base = match theta {
            Some(t) => f32_value(CONFIG, "rope_theta", t)? as f64,
            None => 10000.0,
        };
        let p = Llama3Rope {
            base,
            factor: number(r, "factor", 8.0)?,
            low_freq_factor: number(r, "low_freq_factor", 1.0)?,
            high_freq_factor: number(r, "high_freq_factor", 4.0)?,
            original_context: number(r, "original_max_position_embeddings", 8192.0)?,
        };
        if p.high_freq_factor <= p.low_freq_factor {
            // convert divides by their difference: infinite factors.
            return Err(format_err(CONFIG, "rope_scaling.high_freq_factor", "not above low_freq_factor"));
        }
        Ok(p)
    }

    /// The factor of each of the `head_dim / 2` rotary frequencies (f32 bits).
    pub fn factors(&self, head_dim: u32) -> Vec<u32> {
        let f = |x: f64| x as f32;
        let (base, dim) = (f(self.base), head_dim as f32);
        let high_wavelen = f(self.original_context / self.high_freq_factor);
        let low_wavelen = f(self.original_context / self.low_freq_factor);
        let (old, low, span) = (f(self.original_context), f(self.low_freq_factor), f(self.high_freq_factor - self.low_freq_factor));
        (0..head_dim / 2)
            .map(|k| {
                let e = (2 * k) as f32 / dim;
                let freq = 1.0 / ((base as f64).powf(e as f64) as f32);
                let wavelen = (1.0 / freq) * f(2.0 * std::f64::consts::PI);
                let factor = if wavelen < high_wavelen {
                    1.0
                } else if wavelen > low_wavelen {
                    f(self.factor)
                } else {
                    let smooth = ((1.0 / wavelen) * old - low) / span;
                    1.0 / ((1.0 - smooth) / f(self.factor) + smooth)
                };
                factor.to_bits()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// convert_hf_to_gguf.py's factors (its torch code, run on torch 2 with
    /// AVX-512) for Llama 3.1 8B (head 128, factor 8) and Llama 3.2 1B
    /// (head 64, factor 32): the same bits.
    #[test]
    fn factors_of_llama_3_1_and_3_2_are_converts() {
        let rope = |factor| Llama3Rope { base: 500000.0, factor, low_freq_factor: 1.0, high_freq_factor: 4.0, original_context: 8192.0 };
        let mut l31 = vec![0x3f800000u32; 29];
        l31.extend([0x3f9a8ed5, 0x3fc6d64a, 0x4001af1d, 0x402c732e, 0x406bcace, 0x40a83c06]);
        l31.resize(64, 0x41000000);
        assert_eq!(rope(8.0).factors(128), l31);
        let mut l32 = vec![0x3f800000u32; 15];
        l32.extend([0x3fd35ec2, 0x4052b46f, 0x411aaaee]);
        l32.resize(32, 0x42000000);
        assert_eq!(rope(32.0).factors(64), l32);
    }
}
