//! Links OpenVINO's C library from the Python package the bench runs with
//! (its `libs/libopenvino_c.so.<version>`, which has no unversioned name to
//! link by `-l`), and finds it there at run time.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=OPENVINO_C");
    let library = std::env::var("OPENVINO_C")
        .expect("set OPENVINO_C to OpenVINO's C library (benches/bench_request_path.py does)");
    let folder = Path::new(&library).parent().expect("OPENVINO_C names a file");
    println!("cargo:rustc-link-arg={library}");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", folder.display());
}
