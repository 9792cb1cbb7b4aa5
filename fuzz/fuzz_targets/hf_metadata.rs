//! libFuzzer entry point; the body is weightstream_fuzz_targets::hf_metadata.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weightstream_fuzz_targets::hf_metadata(data));
