//! libFuzzer entry point; the body is weightstream_fuzz_targets::fp8_scale_rule.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weightstream_fuzz_targets::fp8_scale_rule(data));
