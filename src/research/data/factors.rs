//! Monthly Fama–French factors, embedded (docs §7.3): 1949-01 to 2017-03,
//! from Kenneth R. French's Data Library as packaged in linearmodels (see
//! NOTICE). Decimals a month (0.0023 = 0.23 %): the market's excess return
//! `MktRF`, `SMB`, `HML`, momentum `Mom`, the one-month bill `RF`, then 12
//! industry portfolios and 18 size-sorted portfolios, named as in the file.

use std::io::Read;
use std::sync::{Arc, OnceLock};

use chrono::{Datelike, NaiveDate};

use super::DataError;
use super::embedded::EmbeddedError;

const GZ: &[u8] = include_bytes!("../../../assets/data/ff_monthly_1949_2017.csv.gz");
const FILE: &str = "assets/data/ff_monthly_1949_2017.csv.gz";

/// Attribution, also in NOTICE.
pub(crate) const ATTRIBUTION: &str =
    "Fama–French factors, Kenneth R. French Data Library, via linearmodels";

/// The five factor columns, in the file's order, before the portfolios.
const FACTORS: [&str; 5] = ["MktRF", "SMB", "HML", "Mom", "RF"];

/// One month of factors.
#[derive(Clone, Debug, PartialEq)]
pub struct FactorMonth {
    /// The first day of the month.
    pub month: NaiveDate,
    pub mkt_rf: f64,
    pub smb: f64,
    pub hml: f64,
    pub mom: f64,
    pub rf: f64,
    /// Returns of the portfolios named by [`Factors::portfolios`].
    pub portfolios: Vec<f64>,
}

/// The whole table.
#[derive(Clone, Debug, PartialEq)]
pub struct Factors {
    /// The portfolios' names (`NoDur`, …, `S1V1`, …), in column order.
    pub portfolios: Vec<String>,
    /// Every month, oldest first.
    pub months: Vec<FactorMonth>,
}

impl Factors {
    /// The month that holds `date`.
    pub fn month(&self, date: NaiveDate) -> Option<&FactorMonth> {
        let first = date.with_day(1)?;
        let i = self.months.binary_search_by_key(&first, |m| m.month).ok()?;
        self.months.get(i)
    }

    /// A portfolio's return in a month, by name.
    pub fn portfolio(&self, m: &FactorMonth, name: &str) -> Option<f64> {
        let i = self.portfolios.iter().position(|p| p == name)?;
        m.portfolios.get(i).copied()
    }
}

static TABLE: OnceLock<Result<Factors, EmbeddedError>> = OnceLock::new();

fn parse(gz: &[u8]) -> Result<Factors, EmbeddedError> {
    let broken = |d: String| EmbeddedError::Table {
        file: FILE,
        detail: Arc::from(d),
    };
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|e| broken(format!("gunzip: {e}")))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    if header.len() < 6 || header[0] != "dates" || header[1..6] != FACTORS {
        return Err(broken(format!("unexpected header {header:?}")));
    }
    let width = header.len();
    let mut months: Vec<FactorMonth> = Vec::with_capacity(830);
    for (i, line) in lines.enumerate() {
        let err = |d: String| broken(format!("line {}: {d}", i + 2));
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != width {
            return Err(err(format!("{} fields, the header has {width}", f.len())));
        }
        let month = NaiveDate::parse_from_str(f[0], "%Y-%m-%d")
            .ok()
            .filter(|d| d.day() == 1)
            .ok_or_else(|| err(format!("'{}' is not the first of a month", f[0])))?;
        if months.last().is_some_and(|p| p.month >= month) {
            return Err(err(format!("{month} is out of order")));
        }
        let v: Vec<f64> = f[1..]
            .iter()
            .map(|c| c.parse::<f64>().map_err(|e| err(format!("'{c}': {e}"))))
            .collect::<Result<_, _>>()?;
        months.push(FactorMonth {
            month,
            mkt_rf: v[0],
            smb: v[1],
            hml: v[2],
            mom: v[3],
            rf: v[4],
            portfolios: v[5..].to_vec(),
        });
    }
    Ok(Factors {
        portfolios: header[6..].iter().map(|s| s.to_string()).collect(),
        months,
    })
}

/// The monthly factors (parsed once per process).
pub fn monthly() -> Result<&'static Factors, DataError> {
    TABLE
        .get_or_init(|| parse(GZ))
        .as_ref()
        .map_err(|e| DataError::Embedded(e.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn the_table_has_its_documented_span_and_columns() {
        let f = monthly().unwrap();
        assert_eq!(f.months.len(), 819, "1949-01 to 2017-03");
        assert_eq!(f.months[0].month, d("1949-01-01"));
        assert_eq!(f.months.last().unwrap().month, d("2017-03-01"));
        assert_eq!(f.portfolios.len(), 30);
        assert_eq!(f.portfolios[0], "NoDur");
        assert_eq!(f.months[0].mkt_rf, 0.0023);
        assert_eq!(f.months[0].rf, 0.001);
        let m = f.month(d("1949-01-31")).unwrap();
        assert_eq!(m.month, d("1949-01-01"));
        assert_eq!(f.portfolio(m, "NoDur"), Some(m.portfolios[0]));
        assert!(f.month(d("2017-04-01")).is_none());
        // A sanity check on the content: the market's excess return over
        // 1949-2017 averaged more than the bill's rate and stayed within
        // ±50 % a month.
        let mean = f.months.iter().map(|m| m.mkt_rf).sum::<f64>() / 819.0;
        assert!(mean > 0.0 && f.months.iter().all(|m| m.mkt_rf.abs() < 0.5));
    }

    #[test]
    fn a_broken_table_is_named_by_line() {
        use std::io::Write;
        let gz = |text: &str| {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(text.as_bytes()).unwrap();
            z.finish().unwrap()
        };
        let head = "dates,MktRF,SMB,HML,Mom,RF,P1\n";
        let e = parse(&gz(&format!("{head}1949-01-15,1,2,3,4,5,6\n"))).unwrap_err();
        assert!(e.to_string().contains("line 2") && e.to_string().contains("first of a month"));
        let e = parse(&gz(&format!("{head}1949-01-01,1,2,3\n"))).unwrap_err();
        assert!(e.to_string().contains("4 fields"), "{e}");
        let e = parse(&gz("date,a\n")).unwrap_err();
        assert!(e.to_string().contains("unexpected header"), "{e}");
    }
}
