//! What the in-process test servers read of a request after its first line: the headers and
//! the body (`Content-Length` bytes). One reader for all of them, so that each server is only
//! what it answers.

use std::io::BufRead;

/// A request's headers: name (as sent) and value, in order.
pub type Headers = Vec<(String, String)>;

/// The headers (name, value; names as sent) and the body, after the request line.
pub fn read_rest(reader: &mut impl BufRead) -> std::io::Result<(Headers, Vec<u8>)> {
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().unwrap_or(0);
            }
            headers.push((name.to_string(), value.to_string()));
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok((headers, body))
}

/// The body alone, the headers read past.
pub fn read_body(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    Ok(read_rest(reader)?.1)
}

/// A header's value, by name in any case.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}
