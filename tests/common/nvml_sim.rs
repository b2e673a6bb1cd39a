//! The simulated NVML library (tests/nvml-sim/nvml_sim.c), compiled with the system's C
//! compiler (`$CC`, else `cc`) once per test binary, into the target's temporary folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of the built library, for `INFERTOP_NVML_LIBRARY`. Panics with the compiler's
/// output when it does not build: the tests that need it cannot run without it.
pub fn library() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(build)
}

fn build() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml-sim/nvml_sim.c");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvml-sim");
    std::fs::create_dir_all(&dir).expect("the library's folder");
    // Written under a name of this process's own, then renamed: test binaries running at
    // the same time never load a half-written file.
    let partial = dir.join(format!("libnvidia-ml.so.1.{}", std::process::id()));
    let library = dir.join("libnvidia-ml.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-fvisibility=hidden")
        .arg("-o")
        .arg(&partial)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
    assert!(
        out.status.success(),
        "{cc} could not build {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &library).expect("the built library in place");
    library
}
