//! Every input that once crashed a fuzzer, replayed through the same target
//! body (regressions/<target>/*), plus the checked-in seed cases.

use std::path::PathBuf;

#[test]
fn every_saved_crash_input_passes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut replayed = 0;
    for (name, target) in weightstream_fuzz_targets::TARGETS {
        let dir = root.join(name);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let data = std::fs::read(e.path()).unwrap();
            eprintln!("replaying {}", e.path().display());
            target(&data);
            replayed += 1;
        }
    }
    assert!(replayed >= 1, "no regression inputs found under {}", root.display());
}
