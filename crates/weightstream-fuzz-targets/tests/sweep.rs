//! The newer targets over a deterministic sweep of inputs on stable Rust,
//! so that CI checks their rules on every run, not only while fuzzing.

fn inputs(n: usize, len: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..n).map(move |_| {
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    })
}

#[test]
fn slices_sweep() {
    for data in inputs(3000, 64) {
        weightstream_fuzz_targets::slices(&data);
    }
}

#[test]
fn packed_checkpoint_sweep() {
    for data in inputs(3000, 96) {
        weightstream_fuzz_targets::packed_checkpoint(&data);
    }
}
