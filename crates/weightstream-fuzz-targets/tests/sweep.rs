//! The newer targets over a deterministic sweep of inputs on stable Rust,
//! so that CI checks their rules on every run, not only while fuzzing.

/// `n` inputs of `len` bytes: consecutive pieces of one pseudo-random
/// stream (nearby seeds would start out correlated). Under the leak check
/// (scripts/leak_check.sh: valgrind, about 25 times slower) the first
/// `WEIGHTSTREAM_SWEEP_SHARE` of them (a fraction): the same code paths,
/// while cargo test runs them all natively.
fn inputs(n: usize, len: usize) -> impl Iterator<Item = Vec<u8>> {
    let share = std::env::var("WEIGHTSTREAM_SWEEP_SHARE").ok().and_then(|v| v.parse::<f64>().ok()).filter(|f| *f > 0.0 && *f <= 1.0);
    let n = share.map_or(n, |f| ((n as f64 * f).ceil() as usize).max(1));
    let stream = weightstream_io::testing::random_bytes(n * len, 0x2545_f491_4f6c_dd1d);
    (0..n).map(move |i| stream[i * len..(i + 1) * len].to_vec())
}

#[test]
fn slices_sweep() {
    // Many: only about one in thirty lands an accepted column edge inside a block.
    for data in inputs(20000, 64) {
        weightstream_fuzz_targets::slices(&data);
    }
}

#[test]
fn packed_checkpoint_sweep() {
    // Many: a fuzzed config with up to three groups is mostly refused.
    for data in inputs(30000, 96) {
        weightstream_fuzz_targets::packed_checkpoint(&data);
    }
}

#[test]
fn http_responses_sweep() {
    // Each input is a loopback server and a few requests: fewer inputs.
    for data in inputs(400, 24) {
        weightstream_fuzz_targets::http_responses(&data);
    }
}

#[test]
fn hf_metadata_sweep() {
    // Mutation lists of a valid checkpoint: most are refused, some built.
    // Few: each input builds and parses whole JSON files (about 0.7 ms,
    // 25 times that under the leak check's valgrind); the fuzz step and
    // scripts/fuzz.sh run the target on many more.
    // The three unmutated checkpoints (a Llama, a Qwen3-MoE, a Phi-3) must build.
    weightstream_fuzz_targets::hf_metadata(&[0]);
    weightstream_fuzz_targets::hf_metadata(&[1]);
    weightstream_fuzz_targets::hf_metadata(&[2]);
    for data in inputs(2000, 13) {
        weightstream_fuzz_targets::hf_metadata(&data);
    }
}

#[test]
fn dequant_sweep() {
    // Every ISA against scalar, both outputs (BF16 and float16). A random
    // start or length is almost always refused by Kernel::check, so half
    // the inputs start at 0 with a length of whole 64-element steps.
    for (i, mut data) in inputs(4000, 2048).enumerate() {
        if i % 2 == 0 {
            let n = 64 * (data[7] as u16 % 16);
            data[5..9].copy_from_slice(&[0, 0, n as u8, (n >> 8) as u8]);
        }
        weightstream_fuzz_targets::dequant(&data);
    }
}
