//! Writes `include/linger.h` and `include/turquoise.h` from the C API
//! sources (`make header`).

fn main() {
    for h in &linger_headers::HEADERS {
        let text = h.generate().unwrap_or_else(|e| {
            eprintln!("linger-headers: {e}");
            std::process::exit(1)
        });
        let path = h.path();
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if old == text {
            println!("{}: unchanged", h.file);
            continue;
        }
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("linger-headers: {}: {e}", path.display());
            std::process::exit(1);
        }
        println!("{}: written", h.file);
    }
}
