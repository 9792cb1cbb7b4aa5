//! libFuzzer entry point; the body is weightstream_fuzz_targets::http_responses.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weightstream_fuzz_targets::http_responses(data));
