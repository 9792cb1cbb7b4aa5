//! Dequantize one buffer while the previous one is written: two reused
//! buffers pass between the caller, which fills them, and a writer thread,
//! which writes them out in order. Convert then runs at about the speed of
//! its output instead of the sum of dequantization and writing.

use std::io::{self, Write};
use std::sync::mpsc::{channel, sync_channel};
use std::thread;

use weightstream_format::safetensors::writer::write_bf16;

/// What went wrong: the caller's fill (its own error type), or the write.
pub enum Failure<E> {
    Fill(E),
    Write(io::Error),
}

/// Write pieces of BF16 values to `w` in order: each piece is `len(piece)`
/// values (at most the buffers' length), filled into one of the two
/// buffers by `fill(piece, buffer)` while the writer thread writes the
/// previous one; after each piece the writer thread calls `settle(w)`
/// (convert starts the disk writing there, so that the final sync has
/// little left to do). Returns the writer and the buffers once everything is
/// written; on any failure, stops both sides and returns the first error
/// (a fill error, or the write error that stopped the writer).
pub fn overlapped<W, P, E>(
    w: W,
    pieces: impl IntoIterator<Item = P>,
    len: impl Fn(&P) -> usize,
    bufs: [Vec<u16>; 2],
    mut fill: impl FnMut(&P, &mut [u16]) -> Result<(), E>,
    mut settle: impl FnMut(&mut W) -> io::Result<()> + Send,
) -> Result<(W, [Vec<u16>; 2]), Failure<E>>
where
    W: Write + Send,
{
    let cap = bufs[0].len().min(bufs[1].len());
    thread::scope(|s| {
        // Full buffers to the writer (at most one waiting: the caller fills
        // the other meanwhile); empty ones back.
        let (full_tx, full_rx) = sync_channel::<(Vec<u16>, usize)>(1);
        let (free_tx, free_rx) = channel::<Vec<u16>>();
        for b in bufs {
            free_tx.send(b).expect("receiver alive");
        }
        let writer = s.spawn(move || -> io::Result<W> {
            let mut w = w;
            for (buf, n) in full_rx {
                write_bf16(&mut w, &buf[..n])?;
                settle(&mut w)?;
                // The caller may have stopped (a fill error): then nobody takes it back.
                let _ = free_tx.send(buf);
            }
            Ok(w)
        });
        let mut fill_error = None;
        for piece in pieces {
            // A closed channel means the writer stopped on an error: join reports it.
            let Ok(mut buf) = free_rx.recv() else { break };
            let n = len(&piece);
            assert!(n <= cap, "a piece of {n} values does not fit a {cap}-value buffer");
            if let Err(e) = fill(&piece, &mut buf[..n]) {
                fill_error = Some(e);
                break;
            }
            if full_tx.send((buf, n)).is_err() {
                break;
            }
        }
        drop(full_tx);
        let written = writer.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        match (fill_error, written) {
            (Some(e), _) => Err(Failure::Fill(e)),
            (None, Err(e)) => Err(Failure::Write(e)),
            (None, Ok(w)) => {
                // The writer has exited: both buffers are back.
                let mut back = free_rx.try_iter();
                let bufs = [back.next().expect("buffer returned"), back.next().expect("buffer returned")];
                Ok((w, bufs))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that fails after `limit` bytes.
    struct Limited {
        out: Vec<u8>,
        limit: usize,
    }
    impl Write for Limited {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.out.len() + b.len() > self.limit {
                return Err(io::Error::other("disk full"));
            }
            self.out.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn bufs(n: usize) -> [Vec<u16>; 2] {
        [vec![0; n], vec![0; n]]
    }

    /// (first value, length) pieces of `per` covering `total` values.
    fn pieces(total: u64, per: usize) -> Vec<(u64, usize)> {
        (0..total).step_by(per).map(|at| (at, per.min((total - at) as usize))).collect()
    }

    #[test]
    fn writes_every_value_in_order() {
        for (total, per) in [(0u64, 3usize), (1, 3), (7, 3), (9, 3), (1000, 64)] {
            let w = Limited { out: vec![], limit: usize::MAX };
            let (w, back) = overlapped::<_, _, ()>(
                w,
                pieces(total, per),
                |p| p.1,
                bufs(per),
                |p, b| {
                    for (i, v) in b.iter_mut().enumerate() {
                        *v = (p.0 + i as u64) as u16;
                    }
                    Ok(())
                },
                |_| Ok(()),
            )
            .unwrap_or_else(|_| panic!("{total}/{per}"));
            assert_eq!([back[0].len(), back[1].len()], [per, per]);
            let got: Vec<u16> = w.out.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            assert_eq!(got, (0..total).map(|v| v as u16).collect::<Vec<_>>(), "{total}/{per}");
        }
    }

    #[test]
    fn a_fill_error_stops_and_is_returned() {
        let mut calls = 0;
        let r = overlapped(
            Limited { out: vec![], limit: usize::MAX },
            pieces(100, 10),
            |p| p.1,
            bufs(10),
            |p, _| {
                calls += 1;
                if p.0 == 30 {
                    Err("bad block")
                } else {
                    Ok(())
                }
            },
            |_| Ok(()),
        );
        assert!(matches!(r, Err(Failure::Fill("bad block"))));
        assert_eq!(calls, 4);
    }

    #[test]
    fn a_write_error_stops_the_filling_and_is_returned() {
        let mut calls = 0;
        let r = overlapped::<_, _, ()>(
            Limited { out: vec![], limit: 50 },
            pieces(1000, 10),
            |p| p.1,
            bufs(10),
            |_, _| {
                calls += 1;
                Ok(())
            },
            |_| Ok(()),
        );
        match r {
            Err(Failure::Write(e)) => assert_eq!(e.to_string(), "disk full"),
            _ => panic!("expected the write error"),
        }
        assert!(calls < 10, "filling went on after the writer failed: {calls} fills");
    }
}
