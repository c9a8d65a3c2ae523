//! The results file (docs §18.3): `.parquet` or `.csv` by the extension,
//! one row per cell and window in cell then window order. Columns: the
//! axes' last segments, `symbol`, `window`, `final_value`, `total_return`,
//! `sharpe`, `max_drawdown`, `trade_count`.
//!
//! The same results give the same bytes: the local engine and the Ray
//! engine both write their file here. Written to a temp file in the same
//! directory, then renamed into place.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, ConvertedType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde_json::Value;

use super::SweepError;
use super::plan::Plan;
use super::rows::{Results, fmt_f64};

/// Rows per Parquet row group.
const ROW_GROUP: usize = 262_144;

/// The output kinds by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Parquet,
    Csv,
}

/// `.parquet` or `.csv`; anything else is refused before a cell runs.
pub fn check_extension(out: &Path) -> Result<Format, SweepError> {
    match out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("parquet") => Ok(Format::Parquet),
        Some("csv") => Ok(Format::Csv),
        _ => Err(SweepError::Output(format!(
            "--out {}: the results file must end in .parquet or .csv",
            out.display()
        ))),
    }
}

/// How an axis column is typed: by its values over every parameter set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Bool,
    Text,
}

fn kind_of(plan: &Plan, axis: usize) -> Kind {
    let values = || plan.combos.iter().filter_map(|c| c.get(axis));
    if values().all(|v| v.is_i64()) {
        Kind::Int
    } else if values().all(Value::is_number) {
        Kind::Float
    } else if values().all(Value::is_boolean) {
        Kind::Bool
    } else {
        Kind::Text
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The column names in order.
pub fn columns(plan: &Plan) -> Vec<String> {
    let mut c: Vec<String> = plan.axes.iter().map(|a| a.name.clone()).collect();
    for k in [
        "symbol",
        "window",
        "final_value",
        "total_return",
        "sharpe",
        "max_drawdown",
        "trade_count",
    ] {
        c.push(k.to_string());
    }
    c
}

/// Writes `results` to `out` by its extension.
pub fn write(plan: &Plan, results: &Results, out: &Path) -> Result<(), SweepError> {
    let format = check_extension(out)?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(SweepError::io("create", dir))?;
    }
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = crate::fsio::parent_dir(out).join(format!(".{name}.{}.tmp", std::process::id()));
    let written = match format {
        Format::Csv => write_csv(plan, results, &tmp),
        Format::Parquet => write_parquet(plan, results, &tmp),
    };
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(SweepError::io("move into place", out))
}

fn write_csv(plan: &Plan, results: &Results, tmp: &PathBuf) -> Result<(), SweepError> {
    let file = std::fs::File::create(tmp).map_err(SweepError::io("create", tmp))?;
    let mut w = csv::Writer::from_writer(std::io::BufWriter::new(file));
    let fail = |e: csv::Error| SweepError::Output(format!("writing {}: {e}", tmp.display()));
    w.write_record(columns(plan)).map_err(fail)?;
    let mut rec: Vec<String> = Vec::new();
    for r in &results.rows {
        let c = plan.cell(r.cell);
        rec.clear();
        if let Some(values) = plan.combos.get(c.combo) {
            rec.extend(values.iter().map(text_of));
        }
        rec.push(
            plan.units
                .get(c.unit)
                .map_or(String::new(), |u| u.label.clone()),
        );
        rec.push(
            plan.windows
                .get(r.window)
                .map_or(String::new(), |w| w.name.clone()),
        );
        for x in [r.final_value, r.total_return, r.sharpe, r.max_drawdown] {
            rec.push(fmt_f64(x));
        }
        rec.push(r.trade_count.to_string());
        w.write_record(&rec).map_err(fail)?;
    }
    let mut inner = w
        .into_inner()
        .map_err(|e| SweepError::Output(format!("writing {}: {e}", tmp.display())))?;
    inner.flush().map_err(SweepError::io("write", tmp))
}

fn schema(plan: &Plan, kinds: &[Kind]) -> Result<Type, parquet::errors::ParquetError> {
    let prim = |name: &str, t: PhysicalType, utf8: bool| {
        let b = Type::primitive_type_builder(name, t).with_repetition(Repetition::REQUIRED);
        let b = if utf8 {
            b.with_converted_type(ConvertedType::UTF8)
        } else {
            b
        };
        b.build().map(Arc::new)
    };
    let mut fields = Vec::new();
    for (a, k) in plan.axes.iter().zip(kinds) {
        fields.push(match k {
            Kind::Int => prim(&a.name, PhysicalType::INT64, false)?,
            Kind::Float => prim(&a.name, PhysicalType::DOUBLE, false)?,
            Kind::Bool => prim(&a.name, PhysicalType::BOOLEAN, false)?,
            Kind::Text => prim(&a.name, PhysicalType::BYTE_ARRAY, true)?,
        });
    }
    fields.push(prim("symbol", PhysicalType::BYTE_ARRAY, true)?);
    fields.push(prim("window", PhysicalType::BYTE_ARRAY, true)?);
    for k in ["final_value", "total_return", "sharpe", "max_drawdown"] {
        fields.push(prim(k, PhysicalType::DOUBLE, false)?);
    }
    fields.push(prim("trade_count", PhysicalType::INT64, false)?);
    Type::group_type_builder("sweep")
        .with_fields(fields)
        .build()
}

fn write_parquet(plan: &Plan, results: &Results, tmp: &PathBuf) -> Result<(), SweepError> {
    let fail = |e: parquet::errors::ParquetError| {
        SweepError::Output(format!("writing {}: {e}", tmp.display()))
    };
    let kinds: Vec<Kind> = (0..plan.axes.len()).map(|a| kind_of(plan, a)).collect();
    let schema = Arc::new(schema(plan, &kinds).map_err(fail)?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by("vibedesk sweep".into())
            .build(),
    );
    let file = std::fs::File::create(tmp).map_err(SweepError::io("create", tmp))?;
    let mut writer = SerializedFileWriter::new(file, schema, props).map_err(fail)?;
    for chunk in results.rows.chunks(ROW_GROUP) {
        let mut group = writer.next_row_group().map_err(fail)?;
        let mut col = 0usize;
        while let Some(mut cw) = group.next_column().map_err(fail)? {
            write_column(plan, &kinds, chunk, col, &mut cw).map_err(fail)?;
            cw.close().map_err(fail)?;
            col += 1;
        }
        group.close().map_err(fail)?;
    }
    writer.close().map_err(fail)?;
    Ok(())
}

fn write_column(
    plan: &Plan,
    kinds: &[Kind],
    rows: &[super::rows::Row],
    col: usize,
    cw: &mut parquet::file::writer::SerializedColumnWriter<'_>,
) -> Result<(), parquet::errors::ParquetError> {
    let axes = plan.axes.len();
    let combo = |r: &super::rows::Row| plan.combos.get(plan.cell(r.cell).combo);
    let bytes = |s: &str| ByteArray::from(s.as_bytes().to_vec());
    if col < axes {
        let vals = || {
            rows.iter().map(|r| {
                combo(r)
                    .and_then(|c| c.get(col))
                    .cloned()
                    .unwrap_or(Value::Null)
            })
        };
        match kinds[col] {
            Kind::Int => {
                let v: Vec<i64> = vals().map(|v| v.as_i64().unwrap_or(0)).collect();
                cw.typed::<Int64Type>().write_batch(&v, None, None)?;
            }
            Kind::Float => {
                let v: Vec<f64> = vals().map(|v| v.as_f64().unwrap_or(f64::NAN)).collect();
                cw.typed::<DoubleType>().write_batch(&v, None, None)?;
            }
            Kind::Bool => {
                let v: Vec<bool> = vals().map(|v| v.as_bool().unwrap_or(false)).collect();
                cw.typed::<BoolType>().write_batch(&v, None, None)?;
            }
            Kind::Text => {
                let v: Vec<ByteArray> = vals().map(|v| bytes(&text_of(&v))).collect();
                cw.typed::<ByteArrayType>().write_batch(&v, None, None)?;
            }
        }
        return Ok(());
    }
    match col - axes {
        0 => {
            let v: Vec<ByteArray> = rows
                .iter()
                .map(|r| {
                    bytes(
                        plan.units
                            .get(plan.cell(r.cell).unit)
                            .map_or("", |u| u.label.as_str()),
                    )
                })
                .collect();
            cw.typed::<ByteArrayType>().write_batch(&v, None, None)?;
        }
        1 => {
            let v: Vec<ByteArray> = rows
                .iter()
                .map(|r| bytes(plan.windows.get(r.window).map_or("", |w| w.name.as_str())))
                .collect();
            cw.typed::<ByteArrayType>().write_batch(&v, None, None)?;
        }
        k @ 2..=5 => {
            let v: Vec<f64> = rows
                .iter()
                .map(|r| match k {
                    2 => r.final_value,
                    3 => r.total_return,
                    4 => r.sharpe,
                    _ => r.max_drawdown,
                })
                .collect();
            cw.typed::<DoubleType>().write_batch(&v, None, None)?;
        }
        _ => {
            let v: Vec<i64> = rows.iter().map(|r| r.trade_count as i64).collect();
            cw.typed::<Int64Type>().write_batch(&v, None, None)?;
        }
    }
    Ok(())
}
