//! LSP-style `Content-Length: N\r\n\r\n<json>` framing as a tokio-util codec,
//! robust to split and merged reads, with bounds on header and body size.

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

const MAX_HEADER: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("bad frame header: {0}")]
    Header(String),
    #[error("frame of {0} bytes is over the limit of {1}")]
    TooLarge(usize, usize),
}

pub struct ContentLengthCodec {
    max_body: usize,
}

impl ContentLengthCodec {
    pub fn new(max_body: usize) -> Self {
        Self { max_body }
    }
}

impl Decoder for ContentLengthCodec {
    type Item = BytesMut;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, FrameError> {
        let Some(end) = src.windows(4).position(|w| w == b"\r\n\r\n") else {
            if src.len() > MAX_HEADER {
                return Err(FrameError::Header(format!(
                    "no header end within {MAX_HEADER} bytes"
                )));
            }
            return Ok(None);
        };
        let header =
            std::str::from_utf8(&src[..end]).map_err(|_| FrameError::Header("not UTF-8".into()))?;
        let mut len = None;
        for line in header.split("\r\n") {
            let (k, v) = line
                .split_once(':')
                .ok_or_else(|| FrameError::Header(format!("{line:?}")))?;
            if k.trim().eq_ignore_ascii_case("content-length") {
                len = Some(
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| FrameError::Header(format!("bad length {v:?}")))?,
                );
            }
        }
        let len = len.ok_or_else(|| FrameError::Header("no Content-Length".into()))?;
        if len > self.max_body {
            return Err(FrameError::TooLarge(len, self.max_body));
        }
        if src.len() < end + 4 + len {
            src.reserve(end + 4 + len - src.len());
            return Ok(None);
        }
        src.advance(end + 4);
        Ok(Some(src.split_to(len)))
    }
}

impl Encoder<String> for ContentLengthCodec {
    type Error = FrameError;
    fn encode(&mut self, item: String, dst: &mut BytesMut) -> Result<(), FrameError> {
        dst.reserve(item.len() + 32);
        dst.put_slice(format!("Content-Length: {}\r\n\r\n", item.len()).as_bytes());
        dst.put_slice(item.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(s: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{s}", s.len()).into_bytes()
    }

    #[test]
    fn split_and_merged_reads() {
        let mut c = ContentLengthCodec::new(1024);
        let mut all = frame("{\"a\":1}");
        all.extend(frame("{\"b\":2}"));
        let mut buf = BytesMut::new();
        let mut out = vec![];
        // Byte by byte: every split point.
        for b in &all {
            buf.put_u8(*b);
            while let Some(f) = c.decode(&mut buf).unwrap() {
                out.push(String::from_utf8(f.to_vec()).unwrap());
            }
        }
        assert_eq!(out, vec!["{\"a\":1}", "{\"b\":2}"]);
        // Merged: both at once.
        let mut buf = BytesMut::from(&all[..]);
        assert!(c.decode(&mut buf).unwrap().is_some());
        assert!(c.decode(&mut buf).unwrap().is_some());
        assert!(c.decode(&mut buf).unwrap().is_none());
    }

    #[test]
    fn bounds_and_garbage() {
        let mut c = ContentLengthCodec::new(4);
        assert!(matches!(
            c.decode(&mut BytesMut::from(&frame("12345")[..])),
            Err(FrameError::TooLarge(5, 4))
        ));
        assert!(c
            .decode(&mut BytesMut::from(&b"garbage\r\n\r\n"[..]))
            .is_err());
        assert!(c
            .decode(&mut BytesMut::from(&vec![b'x'; MAX_HEADER + 1][..]))
            .is_err());
    }
}
