//! Parsed local files kept as raw columns, so that a rerun over the same
//! files (a parameter sweep in one run dir) reads 48 bytes a bar instead of
//! parsing ~100 bytes of decimal text: parsing was most of a 100-symbol
//! backtest's time.
//!
//! An entry is used only when the file is the very one it was made from
//! (path, device, inode, size, modification and change times), and only
//! when it decodes to exactly the length its header promises; anything
//! else is a miss and the file is parsed again. Entries are written with
//! tmp + rename but without fsync: a torn entry after a crash is a miss,
//! never wrong data. Whether a parse is stored is the caller's choice
//! (`DataConfig::keep_parsed`): backtests store from a run dir's second run
//! on, as an entry costs about as many bytes written as its file, and only
//! parses that were slow (see `ParsedCsv::quick`).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{Datelike, NaiveDate};

use super::Bars;
use super::table::ParsedCsv;

const MAGIC: &[u8; 8] = b"VDBARS01";

/// What identifies the file an entry was made from.
#[derive(Debug, PartialEq, Eq)]
struct Identity {
    path: String,
    stamp: [i64; 7],
}

fn identity(path: &Path, meta: &std::fs::Metadata) -> Identity {
    Identity {
        path: path.display().to_string(),
        stamp: super::file_stamp(meta),
    }
}

fn entry_path(cache_dir: &Path, id: &Identity) -> PathBuf {
    let mut h = std::hash::DefaultHasher::new();
    id.path.hash(&mut h);
    cache_dir.join(format!("{:016x}.bars", h.finish()))
}

/// The cached parse of `path`, if there is a valid one.
pub(crate) fn get(cache_dir: &Path, path: &Path, meta: &std::fs::Metadata) -> Option<ParsedCsv> {
    let id = identity(path, meta);
    let bytes = std::fs::read(entry_path(cache_dir, &id)).ok()?;
    decode(&bytes, &id)
}

/// Keeps `parsed` for the next run; failures only cost the next run a parse.
pub(crate) fn put(cache_dir: &Path, path: &Path, meta: &std::fs::Metadata, parsed: &ParsedCsv) {
    let id = identity(path, meta);
    let target = entry_path(cache_dir, &id);
    let tmp = target.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::create_dir_all(cache_dir)
        .and_then(|()| std::fs::File::create(&tmp))
        .and_then(|mut f| encode_into(&mut f, parsed, &id))
        .and_then(|()| std::fs::rename(&tmp, &target));
    if let Err(e) = written {
        tracing::debug!("parsed-bars cache not written for {}: {e}", path.display());
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The entry, written column by column through a stack buffer: no copy of
/// the whole entry in memory (a second run keeping 100 parses used to
/// fault in and fill 12 MB just to write it).
fn encode_into(out: &mut impl Write, p: &ParsedCsv, id: &Identity) -> std::io::Result<()> {
    let b = &p.bars;
    let n = b.len();
    let mut head = Vec::with_capacity(96 + id.path.len());
    head.extend_from_slice(MAGIC);
    for v in id.stamp {
        head.extend_from_slice(&v.to_le_bytes());
    }
    head.extend_from_slice(&(id.path.len() as u64).to_le_bytes());
    head.extend_from_slice(id.path.as_bytes());
    head.extend_from_slice(&(n as u64).to_le_bytes());
    head.push(u8::from(p.has_volume));
    head.push(u8::from(p.adj_close.is_some()));
    out.write_all(&head)?;
    const CHUNK: usize = 2048;
    let mut buf = [0u8; CHUNK * 8];
    for days in b.dates.chunks(CHUNK * 2) {
        for (slot, d) in buf.chunks_exact_mut(4).zip(days) {
            slot.copy_from_slice(&d.num_days_from_ce().to_le_bytes());
        }
        out.write_all(&buf[..days.len() * 4])?;
    }
    let adj = p.adj_close.as_deref().unwrap_or(&[]);
    for col in [&b.open[..], &b.high, &b.low, &b.close, &b.volume, adj] {
        for xs in col.chunks(CHUNK) {
            for (slot, x) in buf.chunks_exact_mut(8).zip(xs) {
                slot.copy_from_slice(&x.to_le_bytes());
            }
            out.write_all(&buf[..xs.len() * 8])?;
        }
    }
    Ok(())
}

/// Reads little-endian fields off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn f64s(&mut self, n: usize) -> Option<Vec<f64>> {
        let raw = self.take(n.checked_mul(8)?)?;
        Some(
            raw.chunks_exact(8)
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    }
}

fn decode(bytes: &[u8], id: &Identity) -> Option<ParsedCsv> {
    let mut r = Reader(bytes);
    if r.take(8)? != MAGIC {
        return None;
    }
    for want in id.stamp {
        if r.u64()? as i64 != want {
            return None;
        }
    }
    let path_len = usize::try_from(r.u64()?).ok()?;
    if r.take(path_len)? != id.path.as_bytes() {
        return None;
    }
    let n = usize::try_from(r.u64()?).ok()?;
    let flags = r.take(2)?;
    let (has_volume, has_adj) = (flags[0] == 1, flags[1] == 1);
    let cols = 5 + usize::from(has_adj);
    // The rest must be exactly the columns the header promises.
    if Some(r.0.len()) != n.checked_mul(4 + 8 * cols) {
        return None;
    }
    let mut dates: Vec<NaiveDate> = Vec::with_capacity(n);
    let mut prev: Option<(i32, NaiveDate)> = None;
    for c in r.take(n * 4)?.chunks_exact(4) {
        let days = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        // Bars are days apart: stepping from the previous date is several
        // times cheaper than converting each day number from scratch.
        let date = match prev {
            Some((p, d)) if days > p && days - p <= 4 => {
                (0..days - p).try_fold(d, |d, _| d.succ_opt())?
            }
            _ => NaiveDate::from_num_days_from_ce_opt(days)?,
        };
        dates.push(date);
        prev = Some((days, date));
    }
    let bars = Bars {
        dates,
        open: r.f64s(n)?,
        high: r.f64s(n)?,
        low: r.f64s(n)?,
        close: r.f64s(n)?,
        volume: r.f64s(n)?,
    };
    let adj_close = if has_adj { Some(r.f64s(n)?) } else { None };
    Some(ParsedCsv {
        bars,
        adj_close,
        has_volume,
        row_starts: None,
        quick: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(adj: bool) -> ParsedCsv {
        let mut bars = Bars::with_capacity(3);
        let d = NaiveDate::from_ymd_opt(2010, 1, 4).unwrap();
        // Steps of one and four days, a long gap, and one out of order.
        for (i, date) in [
            d,
            d.succ_opt().unwrap(),
            d + chrono::Days::new(5),
            d + chrono::Days::new(40),
            d - chrono::Days::new(3),
        ]
        .into_iter()
        .enumerate()
        {
            let x = 10.0 + i as f64 / 3.0;
            bars.push(date, x, x + 1.0, x - 1.0, x, f64::NAN);
        }
        ParsedCsv {
            bars,
            adj_close: adj.then(|| vec![1.0, 2.0, 3.0, 4.0, 5.0]),
            has_volume: false,
            row_starts: None,
            quick: false,
        }
    }

    fn same(a: &ParsedCsv, b: &ParsedCsv) -> bool {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        a.bars.dates == b.bars.dates
            && [
                (&a.bars.open, &b.bars.open),
                (&a.bars.high, &b.bars.high),
                (&a.bars.low, &b.bars.low),
                (&a.bars.close, &b.bars.close),
                (&a.bars.volume, &b.bars.volume),
            ]
            .iter()
            .all(|(x, y)| bits(x) == bits(y))
            && a.adj_close == b.adj_close
            && a.has_volume == b.has_volume
    }

    #[test]
    fn an_entry_round_trips_and_only_for_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("X.csv");
        std::fs::write(&file, "date,close\n").unwrap();
        let cache = dir.path().join("cache");
        for adj in [false, true] {
            let meta = std::fs::metadata(&file).unwrap();
            let p = sample(adj);
            put(&cache, &file, &meta, &p);
            assert!(same(&get(&cache, &file, &meta).unwrap(), &p), "adj {adj}");
        }
        // Rewritten (new size and times): a miss.
        std::fs::write(&file, "date,close\n2010-01-04,1\n").unwrap();
        assert!(get(&cache, &file, &std::fs::metadata(&file).unwrap()).is_none());
    }

    #[test]
    fn torn_or_foreign_entries_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("Y.csv");
        std::fs::write(&file, "date,close\n").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let cache = dir.path().join("cache");
        put(&cache, &file, &meta, &sample(false));
        let entry = entry_path(&cache, &identity(&file, &meta));
        let full = std::fs::read(&entry).unwrap();
        for cut in [0, 7, 40, full.len() - 1] {
            std::fs::write(&entry, &full[..cut]).unwrap();
            assert!(get(&cache, &file, &meta).is_none(), "cut at {cut}");
        }
        let mut longer = full.clone();
        longer.push(0);
        std::fs::write(&entry, &longer).unwrap();
        assert!(get(&cache, &file, &meta).is_none());
        let mut flipped = full;
        flipped[9] ^= 1;
        std::fs::write(&entry, &flipped).unwrap();
        assert!(get(&cache, &file, &meta).is_none(), "another file's stamp");
    }
}
