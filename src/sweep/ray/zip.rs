//! The package a Ray job runs from (docs §19.2): a plain zip archive, built
//! in memory with flate2 (already a dependency) rather than a zip crate.
//! Entries sit at the archive's root (Ray unpacks a `gcs://` package as the
//! job's working directory), carry Unix modes (Ray restores them, so the
//! binary stays executable) and a fixed date, so the same files always give
//! the same bytes. No zip64: a package over 4 GiB is refused, as Ray refuses
//! far smaller ones (its limit is the gRPC message size, 512 MiB).

use std::io::Write;

/// The largest entry or archive the classic zip format describes.
const ZIP32_LIMIT: u64 = u32::MAX as u64;

/// 1980-01-01 00:00 in MS-DOS form: the fixed date of every entry.
const DOS_DATE: u16 = (1 << 5) | 1;
const DOS_TIME: u16 = 0;
/// Version 2.0 (deflate), made on Unix (3), so the mode bits are read.
const VERSION_NEEDED: u16 = 20;
const VERSION_MADE_BY: u16 = (3 << 8) | 20;
/// Bit 11: the names are UTF-8.
const FLAG_UTF8: u16 = 1 << 11;

#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("'{name}' is {size} bytes: a package entry must be under 4 GiB")]
    TooLarge { name: String, size: u64 },
    #[error("cannot compress '{name}': {source}")]
    Compress {
        name: String,
        #[source]
        source: std::io::Error,
    },
}

/// How an entry is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Stored,
    Deflated,
}

impl Method {
    fn code(self) -> u16 {
        match self {
            Method::Stored => 0,
            Method::Deflated => 8,
        }
    }
}

/// One file of the archive: its name (with `/` between directories), Unix
/// mode and contents.
pub struct Entry<'a> {
    pub name: &'a str,
    pub mode: u32,
    pub data: &'a [u8],
}

struct Written {
    name: Vec<u8>,
    mode: u32,
    method: Method,
    crc: u32,
    compressed: u32,
    size: u32,
    offset: u32,
}

/// The zip archive of `entries`, in their order.
pub fn build(entries: &[Entry<'_>], method: Method) -> Result<Vec<u8>, ZipError> {
    let mut out = Vec::new();
    let mut written = Vec::with_capacity(entries.len());
    for e in entries {
        let too_large = |size: u64| ZipError::TooLarge {
            name: e.name.to_string(),
            size,
        };
        let size = u32::try_from(e.data.len()).map_err(|_| too_large(e.data.len() as u64))?;
        let body = match method {
            Method::Stored => std::borrow::Cow::Borrowed(e.data),
            Method::Deflated => std::borrow::Cow::Owned(deflate(e)?),
        };
        let compressed = u32::try_from(body.len()).map_err(|_| too_large(body.len() as u64))?;
        let offset = u32::try_from(out.len()).map_err(|_| too_large(out.len() as u64))?;
        let mut crc = flate2::Crc::new();
        crc.update(e.data);
        let w = Written {
            name: e.name.as_bytes().to_vec(),
            mode: e.mode,
            method,
            crc: crc.sum(),
            compressed,
            size,
            offset,
        };
        local_header(&mut out, &w);
        out.extend_from_slice(&body);
        written.push(w);
    }
    let directory_start = out.len() as u64;
    for w in &written {
        central_header(&mut out, w);
    }
    let end = out.len() as u64;
    if end > ZIP32_LIMIT {
        return Err(ZipError::TooLarge {
            name: "the package".to_string(),
            size: end,
        });
    }
    end_of_directory(
        &mut out,
        written.len(),
        end - directory_start,
        directory_start,
    );
    Ok(out)
}

fn deflate(e: &Entry<'_>) -> Result<Vec<u8>, ZipError> {
    let mut z = flate2::write::DeflateEncoder::new(
        Vec::with_capacity(e.data.len() / 2),
        flate2::Compression::fast(),
    );
    z.write_all(e.data)
        .and_then(|()| z.finish())
        .map_err(|source| ZipError::Compress {
            name: e.name.to_string(),
            source,
        })
}

fn u16le(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn u32le(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// The fields a local header and a central-directory header share, from
/// "version needed" to the extra field's length.
fn common_fields(out: &mut Vec<u8>, w: &Written) {
    u16le(out, VERSION_NEEDED);
    u16le(out, FLAG_UTF8);
    u16le(out, w.method.code());
    u16le(out, DOS_TIME);
    u16le(out, DOS_DATE);
    u32le(out, w.crc);
    u32le(out, w.compressed);
    u32le(out, w.size);
    u16le(out, w.name.len() as u16);
    u16le(out, 0);
}

fn local_header(out: &mut Vec<u8>, w: &Written) {
    u32le(out, 0x0403_4b50);
    common_fields(out, w);
    out.extend_from_slice(&w.name);
}

fn central_header(out: &mut Vec<u8>, w: &Written) {
    u32le(out, 0x0201_4b50);
    u16le(out, VERSION_MADE_BY);
    common_fields(out, w);
    u16le(out, 0); // comment length
    u16le(out, 0); // disk number
    u16le(out, 0); // internal attributes
    u32le(out, w.mode << 16);
    u32le(out, w.offset);
    out.extend_from_slice(&w.name);
}

fn end_of_directory(out: &mut Vec<u8>, entries: usize, size: u64, offset: u64) {
    let entries = entries.min(usize::from(u16::MAX)) as u16;
    u32le(out, 0x0605_4b50);
    u16le(out, 0);
    u16le(out, 0);
    u16le(out, entries);
    u16le(out, entries);
    u32le(out, size as u32);
    u32le(out, offset as u32);
    u16le(out, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries<'a>(data: &'a [u8]) -> Vec<Entry<'a>> {
        vec![
            Entry {
                name: "vibedesk",
                mode: 0o100755,
                data,
            },
            Entry {
                name: "job.json",
                mode: 0o100644,
                data: b"{\"n\":2}",
            },
        ]
    }

    #[test]
    fn the_same_files_give_the_same_bytes() {
        let data = vec![7u8; 10_000];
        let a = build(&entries(&data), Method::Deflated).unwrap();
        let b = build(&entries(&data), Method::Deflated).unwrap();
        assert_eq!(a, b);
        // Deflate shrinks a repetitive file; stored keeps it whole.
        assert!(a.len() < 1_000, "{}", a.len());
        let stored = build(&entries(&data), Method::Stored).unwrap();
        assert!(stored.len() > 10_000);
    }

    #[test]
    fn python_reads_the_archive_with_its_modes() {
        // Python's zipfile is what Ray unpacks with; skip where there is none.
        let Ok(python) = which_python() else {
            eprintln!("SKIPPED: no python3 to read the archive with");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 31 % 251) as u8).collect();
        for method in [Method::Stored, Method::Deflated] {
            let path = dir.path().join("p.zip");
            std::fs::write(&path, build(&entries(&data), method).unwrap()).unwrap();
            let script = "import sys,zipfile,hashlib\nz=zipfile.ZipFile(sys.argv[1])\nz.testzip()\nfor i in z.infolist(): print(i.filename, oct(i.external_attr>>16), hashlib.sha256(z.read(i)).hexdigest())";
            let out = std::process::Command::new(&python)
                .args(["-c", script])
                .arg(&path)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            let text = String::from_utf8(out.stdout).unwrap();
            let digest = |d: &[u8]| {
                use sha2::Digest;
                sha2::Sha256::digest(d)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            };
            let expected = format!(
                "vibedesk 0o100755 {}\njob.json 0o100644 {}\n",
                digest(&data),
                digest(b"{\"n\":2}")
            );
            assert_eq!(text, expected, "{method:?}");
        }
    }

    fn which_python() -> Result<String, ()> {
        let ok = std::process::Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok { Ok("python3".into()) } else { Err(()) }
    }
}
