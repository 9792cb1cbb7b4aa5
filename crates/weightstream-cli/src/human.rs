//! Human-readable numbers and aligned tables.

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

pub fn shape(s: &[u64]) -> String {
    let parts: Vec<String> = s.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// "5GB", "500MB", "2GiB", "1048576": bytes. Decimal units are powers of
/// 1000, binary ones (KiB, MiB, GiB, TiB) powers of 1024.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.trim().parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024f64.powi(4),
        _ => return None,
    };
    let v = num * mult;
    (v.is_finite() && v >= 1.0).then_some(v as u64)
}

/// Columns padded to their widest cell; the last column is not padded.
pub struct Table {
    rows: Vec<Vec<String>>,
    right: Vec<bool>,
}

impl Table {
    pub fn new(header: &[&str], right_aligned: &[bool]) -> Self {
        Table { rows: vec![header.iter().map(|s| s.to_string()).collect()], right: right_aligned.to_vec() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> =
            (0..n).map(|c| self.rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for r in &self.rows {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                let pad = widths[c] - cell.chars().count();
                let last = c + 1 == r.len();
                if self.right.get(c).copied().unwrap_or(false) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(shape(&[4096, 11008]), "[4096, 11008]");
        assert_eq!(parse_size("5GB"), Some(5_000_000_000));
        assert_eq!(parse_size("2 GiB"), Some(2 << 30));
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("1.5MB"), Some(1_500_000));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("0"), None);
    }
}

/// `s` safe to print on a terminal: control characters (an escape sequence
/// hidden in a tensor name could repaint the screen) shown as `\u{1b}`
/// escapes; line breaks kept.
pub fn printable(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return s.to_string();
    }
    s.chars().map(|c| if c.is_control() && c != '\n' { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(super::printable("bad\x1b[31mname"), "bad\\u{1b}[31mname");
        assert_eq!(super::printable("ok\nnext"), "ok\nnext");
        assert_eq!(super::printable("blk.0\t"), "blk.0\\u{9}");
    }
}
