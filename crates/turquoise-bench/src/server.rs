//! The server of the paper's Figure 4: hyper 1.x, `GET /N` spins N opaque
//! calls and answers 200 with an empty body. Three ways to run it:
//!
//! - `tokio`: tokio's current-thread runtime, a task per connection;
//! - `wrapped`: the same, every connection task wrapped in
//!   `turquoise::preemptible` with no time limit (the wrapper's cost);
//! - `turquoise`: `turquoise::Runtime`, one worker, a task per connection
//!   preempted after `slice`.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use turquoise::PreemptibleExt;

async fn handle(req: Request<hyper::body::Incoming>) -> Result<Response<Empty<Bytes>>, Infallible> {
    match req.uri().path().trim_start_matches('/').parse::<u64>() {
        Ok(n) => {
            std::hint::black_box(bench_util::work(n));
            Ok(Response::new(Empty::new()))
        }
        Err(_) => {
            let mut r = Response::new(Empty::new());
            *r.status_mut() = hyper::StatusCode::NOT_FOUND;
            Ok(r)
        }
    }
}

/// Serves one connection (keep-alive) until the client closes it.
async fn connection(stream: tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(stream);
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, hyper::service::service_fn(handle)).await;
}

async fn accept_loop<S, F>(listener: TcpListener, spawn: S)
where
    S: Fn(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> F,
{
    loop {
        match listener.accept().await {
            Ok((s, _)) => {
                spawn(Box::pin(connection(s)));
            }
            Err(e) => eprintln!("accept: {e}"),
        }
    }
}

/// Runs the server on `port` until killed.
pub fn run(mode: &str, slice: Duration, port: u16) -> Result<(), String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    match mode {
        "tokio" | "wrapped" => {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
            let wrapped = mode == "wrapped";
            rt.block_on(async move {
                let l = TcpListener::bind(addr).await.map_err(|e| e.to_string())?;
                println!("ready");
                accept_loop(l, |c| {
                    if wrapped {
                        drop(tokio::spawn(c.preemptible(Duration::MAX)));
                    } else {
                        drop(tokio::spawn(c));
                    }
                })
                .await;
                Ok(())
            })
        }
        "turquoise" => {
            let rt = turquoise::Builder::new().worker_threads(1).slice(slice).enable_all().build().map_err(|e| e.to_string())?;
            let l = rt.block_on(async { TcpListener::bind(addr).await }).map_err(|e| e.to_string())?;
            println!("ready");
            // The accept loop is a task of the worker too (cooperative: it
            // only accepts), so that the main thread stays out of the way.
            let h = rt.spawn_cooperative(accept_loop(l, |c| drop(turquoise::spawn(c))));
            rt.block_on(h).map_err(|e| e.to_string())
        }
        m => Err(format!("unknown server mode {m:?} (tokio, wrapped, turquoise)")),
    }
}
