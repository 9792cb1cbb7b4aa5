//! `http_responses`: the HTTP source against an in-process server whose
//! answers the input scripts (status, ETag, Last-Modified, Content-Range,
//! Content-Length, body length), served from two versions of one object
//! of the same length. The server may drop validators, ignore the
//! conditional headers and switch versions between requests, but never
//! lies: a validator it sends is the served version's. The rule (issue 40
//! item 2): a read that succeeds returns exactly the pinned version's
//! bytes, unless the pinned answer carried neither ETag nor Last-Modified
//! (then only the length can be compared, as docs/storage.md says).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use weightstream_format::ByteSource;
use weightstream_remote::{open_object, RemoteOptions};

const LEN: usize = 3000;
const ETAGS: [&str; 2] = ["\"v0\"", "\"v1\""];
const DATES: [&str; 2] = ["Tue, 14 Nov 2023 22:13:20 GMT", "Tue, 14 Nov 2023 22:30:00 GMT"];

/// One scripted answer, decoded from 2 input bytes.
#[derive(Clone, Copy, Debug)]
struct Answer {
    version: usize,
    status: u16,
    e_tag: bool,
    last_modified: bool,
    content_range: bool,
    /// Bytes added to (or cut from) the body, framing kept honest.
    body_delta: i8,
}

impl Answer {
    fn decode(a: u8, b: u8) -> Answer {
        let status = match b & 7 {
            0 => 200,
            1 => 404,
            2 => 412,
            3 => 500,
            _ => 206,
        };
        let body_delta = match (b >> 3) & 7 {
            0 => -2,
            1 => 3,
            _ => 0,
        };
        Answer {
            version: (a & 1) as usize,
            status,
            e_tag: a & 2 == 0,
            last_modified: a & 4 == 0,
            content_range: a & 8 == 0 || b & 0x40 == 0,
            body_delta,
        }
    }
}

fn version(v: usize) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(31).wrapping_add(v as u8 * 101)).collect()
}

/// What the server is told and did: the current input's generation (its
/// URL path; a request for another is a straggler of an earlier input and
/// is closed unanswered), its script and, for the oracle, what was served.
#[derive(Default)]
struct State {
    generation: u64,
    script: Vec<Answer>,
    served: Vec<Answer>,
}

/// One loopback server for the whole process (a listener and a thread per
/// input cost more than the input's reads): the address and its state.
fn server() -> Option<&'static (SocketAddr, Mutex<State>)> {
    static SERVER: OnceLock<Option<(SocketAddr, Mutex<State>)>> = OnceLock::new();
    let s = SERVER.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").ok()?;
        let addr = listener.local_addr().ok()?;
        std::thread::spawn(move || serve(listener));
        Some((addr, Mutex::new(State::default())))
    });
    s.as_ref()
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Answers each connection with the current script's next answer (the
/// last one repeats), then closes it.
fn serve(listener: TcpListener) {
    let versions = [version(0), version(1)];
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let Some((generation, range)) = read_request(&mut conn) else { continue };
        let Some((_, state)) = server() else { return };
        let mut s = lock(state);
        if s.generation != generation || s.script.is_empty() {
            continue;
        }
        let a = s.script[s.served.len().min(s.script.len() - 1)];
        s.served.push(a);
        drop(s);
        let _ = conn.write_all(&response(&a, range, &versions[a.version]));
        let _ = conn.shutdown(std::net::Shutdown::Both);
    }
}

/// The request's generation (its path, `/GENERATION/m.bin`) and its
/// `Range: bytes=a-b`, if any.
fn read_request(conn: &mut TcpStream) -> Option<(u64, Option<(usize, usize)>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let path = text.split(' ').nth(1)?;
    let generation = path.strip_prefix('/')?.split('/').next()?.parse().ok()?;
    let range = text.lines().find_map(|l| l.strip_prefix("range: bytes=")).and_then(|r| {
        let (a, b) = r.trim().split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    });
    Some((generation, range))
}

fn response(a: &Answer, range: Option<(usize, usize)>, data: &[u8]) -> Vec<u8> {
    let (lo, hi) = range.map_or((0, data.len() - 1), |(lo, hi)| (lo.min(data.len() - 1), hi.min(data.len() - 1)));
    let mut body = if matches!(a.status, 200 | 206) { data[lo..=hi.max(lo)].to_vec() } else { Vec::new() };
    match a.body_delta {
        d if d < 0 => body.truncate(body.len().saturating_sub(d.unsigned_abs() as usize)),
        d => body.extend(std::iter::repeat_n(0xEE, d as usize)),
    }
    let mut head = format!("HTTP/1.1 {} X\r\nConnection: close\r\nContent-Length: {}\r\n", a.status, body.len());
    if a.e_tag {
        head += &format!("ETag: {}\r\n", ETAGS[a.version]);
    }
    if a.last_modified {
        head += &format!("Last-Modified: {}\r\n", DATES[a.version]);
    }
    if a.status == 206 && a.content_range {
        head += &format!("Content-Range: bytes {lo}-{hi}/{}\r\n", data.len());
    }
    let mut out = (head + "\r\n").into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The fuzz body: byte 0 the reads' count, then per read 4 bytes (offset,
/// length), then the script, 2 bytes an answer.
pub fn http_responses(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else { return };
    let reads = (n % 3 + 1) as usize;
    if rest.len() < reads * 4 + 2 {
        return;
    }
    let (spans, script) = rest.split_at(reads * 4);
    let script: Vec<Answer> = script.chunks_exact(2).take(16).map(|c| Answer::decode(c[0], c[1])).collect();
    let Some((addr, state)) = server() else { return };
    // One input at a time owns the server's script.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let generation = {
        let mut s = lock(state);
        s.generation += 1;
        s.script = script;
        s.served.clear();
        s.generation
    };
    // No retries, small parts: every answer the script holds is seen.
    let opts = RemoteOptions {
        concurrency: 1,
        part_size: 1000,
        retries: 0,
        retry_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
        cache: None,
        cancel: None,
    };
    if let Ok(src) = open_object(&format!("http://{addr}/{generation}/m.bin?sig=s"), &opts) {
        let pinned = lock(state).served[0];
        assert_eq!(src.len(), LEN as u64, "the pinned length is the served version's");
        for s in spans.chunks_exact(4) {
            let offset = u16::from_le_bytes([s[0], s[1]]) as usize % LEN;
            let len = (u16::from_le_bytes([s[2], s[3]]) as usize % 2500).min(LEN - offset);
            let mut buf = vec![0u8; len];
            if src.read_at(offset as u64, &mut buf).is_ok() && (pinned.e_tag || pinned.last_modified) {
                assert!(
                    buf == version(pinned.version)[offset..offset + len],
                    "bytes {offset}..{} are not the pinned version's: {:?}",
                    offset + len,
                    lock(state).served
                );
            }
        }
    }
}
