//! `#[turquoise::main]`: `async fn main` on a `turquoise::Runtime`;
//! `#[turquoise::test]`: an `async fn` test, on a runtime of its own.
//!
//! ```ignore
//! #[turquoise::main(worker_threads = 4, slice_us = 2000)]
//! async fn main() { ... }
//!
//! #[turquoise::test(worker_threads = 1)]
//! async fn answers() { assert_eq!(turquoise::spawn(async { 42 }).await.unwrap(), 42) }
//! ```
//!
//! Each becomes a plain `fn` that builds the runtime (every driver on) and
//! runs the body with `Runtime::block_on` (the body itself is not preempted,
//! as tokio's `block_on`; the tasks it spawns are); a test gets `#[test]`.
//! Written on `proc_macro` alone: the input is one function, and `syn`
//! would be most of the build.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

fn error(msg: &str) -> TokenStream {
    format!("compile_error!({msg:?});").parse().expect("compile_error tokens")
}

/// `name = value` pairs of the attribute.
fn options(attr: TokenStream) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let toks: Vec<TokenTree> = attr.into_iter().collect();
    for chunk in toks.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
        match chunk {
            [] => {}
            [TokenTree::Ident(k), TokenTree::Punct(eq), TokenTree::Literal(v)] if eq.as_char() == '=' => {
                out.push((k.to_string(), v.to_string()));
            }
            _ => return Err("expected `name = value` options: worker_threads, slice_us".into()),
        }
    }
    Ok(out)
}

/// Runs `async fn main` on a `turquoise::Runtime`.
#[proc_macro_attribute]
pub fn main(attr: TokenStream, item: TokenStream) -> TokenStream {
    on_runtime("main", attr, item)
}

/// Runs an `async fn` test on a `turquoise::Runtime` of its own (as
/// `#[tokio::test]`): the function gets `#[test]`.
#[proc_macro_attribute]
pub fn test(attr: TokenStream, item: TokenStream) -> TokenStream {
    let f = on_runtime("test", attr, item);
    let mut out: TokenStream = "#[::core::prelude::v1::test]".parse().expect("the test attribute");
    out.extend(f);
    out
}

/// The `async fn` `item`, made a plain one that runs its body on a runtime
/// built as `attr` says (`#[turquoise::{what}]`).
fn on_runtime(what: &str, attr: TokenStream, item: TokenStream) -> TokenStream {
    let opts = match options(attr) {
        Ok(o) => o,
        Err(e) => return error(&e),
    };
    let mut builder = String::from("::turquoise::Builder::new()");
    for (k, v) in &opts {
        match k.as_str() {
            "worker_threads" => builder.push_str(&format!(".worker_threads({v})")),
            "slice_us" => builder.push_str(&format!(".slice(::std::time::Duration::from_micros({v}))")),
            _ => return error(&format!("unknown option `{k}` (worker_threads, slice_us)")),
        }
    }
    builder.push_str(".enable_all().build().expect(\"turquoise: cannot start the runtime\")");
    let mut toks: Vec<TokenTree> = item.into_iter().collect();
    let Some(at) = toks.iter().position(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "async")) else {
        return error(&format!("#[turquoise::{what}] goes on an `async fn`"));
    };
    toks.remove(at);
    let Some(TokenTree::Group(body)) = toks.pop() else { return error(&format!("#[turquoise::{what}]: expected a function body")) };
    if body.delimiter() != Delimiter::Brace {
        return error(&format!("#[turquoise::{what}]: expected a function body"));
    }
    let new_body: TokenStream = match format!("{builder}.block_on(async move {body})").parse() {
        Ok(b) => b,
        Err(_) => return error(&format!("#[turquoise::{what}]: cannot rewrite the body")),
    };
    toks.push(TokenTree::Group(Group::new(Delimiter::Brace, new_body)));
    toks.into_iter().collect()
}
